#pragma once
// A driver library (torchplug/driver.h) loaded into the process: dlopen, its
// TPD_GetApi, the version and struct-size checks, its extensions, and its
// errors turned into C++ exceptions carrying the driver's message. No torch
// header here: the torch layer turns DriverError into torch's exceptions.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "torchplug/driver.h"

namespace torchplug::driver {

// A failed driver call: the driver's code and message (the message is what()).
class DriverError : public std::runtime_error {
 public:
  DriverError(TPD_ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  TPD_ErrorCode code() const { return code_; }

 private:
  TPD_ErrorCode code_;
};

class DriverLibrary {
 public:
  // The library at `path`, loaded once per process (later calls return the
  // same object). Throws DriverError(TPD_UNAVAILABLE) when it cannot be
  // loaded or has no TPD_GetApi, and TPD_VERSION_MISMATCH when it speaks
  // another major version or its table is too small for this core.
  static const DriverLibrary& load(const std::string& path);

  const std::string& path() const { return path_; }
  const TPD_Api& api() const { return *api_; }
  const char* name() const { return api_->driver_name != nullptr ? api_->driver_name : "(unnamed driver)"; }
  const char* version() const { return api_->driver_version != nullptr ? api_->driver_version : ""; }
  // Null when the driver does not offer the extension (or offers an older, smaller one).
  const TPD_SimulatorExtension* simulator() const { return simulator_; }
  const TPD_ProfilerExtension* profiler() const { return profiler_; }
  const TPD_IpcExtension* ipc() const { return ipc_; }
  const TPD_KernelModulesExtension* kernel_modules() const { return kernel_modules_; }
  const TPD_GraphCaptureExtension* graph_capture() const { return graph_capture_; }

  // Throws the DriverError `error` describes (and destroys it); nothing when null.
  void check(TPD_Error* error) const {
    if (error != nullptr) {
      raise(error);
    }
  }
  [[noreturn]] void raise(TPD_Error* error) const;

 private:
  DriverLibrary(std::string path, const TPD_Api* api);

  std::string path_;
  const TPD_Api* api_;
  const TPD_SimulatorExtension* simulator_ = nullptr;
  const TPD_ProfilerExtension* profiler_ = nullptr;
  const TPD_IpcExtension* ipc_ = nullptr;
  const TPD_KernelModulesExtension* kernel_modules_ = nullptr;
  const TPD_GraphCaptureExtension* graph_capture_ = nullptr;
};

}  // namespace torchplug::driver
