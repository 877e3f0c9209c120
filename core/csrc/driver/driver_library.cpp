#include "driver/driver_library.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

namespace torchplug::driver {
namespace {

std::mutex libraries_mutex;
// Leaked on purpose: stream workers of a driver may call back while the process exits.
auto* libraries = new std::map<std::string, std::unique_ptr<DriverLibrary>>();

template <typename Extension>
const Extension* find_extension(const TPD_Api& api, TPD_ExtensionType type, size_t needed_size) {
  for (const TPD_ExtensionBase* base = api.extension_start; base != nullptr; base = base->next) {
    if (base->type == type) {
      return base->struct_size >= needed_size ? reinterpret_cast<const Extension*>(base) : nullptr;
    }
  }
  return nullptr;
}

std::string error_message(const TPD_Api& api, const TPD_Error* error) {
  TPD_Error_Message_Args args{};
  args.struct_size = TPD_Error_Message_Args_STRUCT_SIZE;
  args.error = error;
  api.error_message(&args);
  return args.message != nullptr ? std::string(args.message, args.message_size) : std::string("(no message)");
}

}  // namespace

DriverLibrary::DriverLibrary(std::string path, const TPD_Api* api) : path_(std::move(path)), api_(api) {
  simulator_ = find_extension<TPD_SimulatorExtension>(*api, TPD_EXTENSION_SIMULATOR, TPD_SimulatorExtension_STRUCT_SIZE);
  profiler_ = find_extension<TPD_ProfilerExtension>(*api, TPD_EXTENSION_PROFILER, TPD_ProfilerExtension_STRUCT_SIZE);
  ipc_ = find_extension<TPD_IpcExtension>(*api, TPD_EXTENSION_IPC, TPD_IpcExtension_STRUCT_SIZE);
  kernel_modules_ = find_extension<TPD_KernelModulesExtension>(*api, TPD_EXTENSION_KERNEL_MODULES,
                                                               TPD_KernelModulesExtension_STRUCT_SIZE);
  graph_capture_ = find_extension<TPD_GraphCaptureExtension>(*api, TPD_EXTENSION_GRAPH_CAPTURE,
                                                             TPD_GraphCaptureExtension_STRUCT_SIZE);
}

const DriverLibrary& DriverLibrary::load(const std::string& path) {
  std::lock_guard<std::mutex> lock(libraries_mutex);
  auto found = libraries->find(path);
  if (found != libraries->end()) {
    return *found->second;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw DriverError(TPD_UNAVAILABLE, "Cannot load the driver library " + path + ": " +
                                           (reason != nullptr ? reason : "unknown reason") +
                                           ". Check the backend's driver path and that the library's "
                                           "dependencies are installed.");
  }
  auto get_api = reinterpret_cast<TPD_GetApiFunction>(dlsym(handle, TPD_ENTRY_POINT));
  if (get_api == nullptr) {
    throw DriverError(TPD_UNAVAILABLE, "The library " + path + " is not a torchplug driver: it exports no " +
                                           TPD_ENTRY_POINT + " (see torchplug/driver.h).");
  }
  const TPD_Api* api = get_api();
  if (api == nullptr) {
    throw DriverError(TPD_UNAVAILABLE, "The driver " + path + " returned no function table from " +
                                           TPD_ENTRY_POINT + ".");
  }
  if (api->api_version.major != TPD_API_MAJOR) {
    throw DriverError(TPD_VERSION_MISMATCH,
                      "The driver " + path + " speaks driver interface " + std::to_string(api->api_version.major) +
                          "." + std::to_string(api->api_version.minor) + ", but this torchplug speaks " +
                          std::to_string(TPD_API_MAJOR) + "." + std::to_string(TPD_API_MINOR) +
                          ": the major versions must match. Install a driver built for interface " +
                          std::to_string(TPD_API_MAJOR) + ".x.");
  }
  if (api->struct_size < TPD_Api_STRUCT_SIZE) {
    throw DriverError(TPD_VERSION_MISMATCH,
                      "The driver " + path + " has a function table of " + std::to_string(api->struct_size) +
                          " bytes (interface " + std::to_string(api->api_version.major) + "." +
                          std::to_string(api->api_version.minor) + "), smaller than the " +
                          std::to_string(TPD_Api_STRUCT_SIZE) + " bytes of interface " +
                          std::to_string(TPD_API_MAJOR) + "." + std::to_string(TPD_API_MINOR) +
                          " this torchplug needs. Install a newer driver.");
  }
  std::unique_ptr<DriverLibrary> library(new DriverLibrary(path, api));
  const DriverLibrary& result = *library;
  libraries->emplace(path, std::move(library));
  return result;
}

void DriverLibrary::raise(TPD_Error* error) const {
  TPD_Error_GetCode_Args code{};
  code.struct_size = TPD_Error_GetCode_Args_STRUCT_SIZE;
  code.error = error;
  TPD_Error* failed = api_->error_get_code(&code);
  std::string message = error_message(*api_, error);
  TPD_Error_Destroy_Args destroy{};
  destroy.struct_size = TPD_Error_Destroy_Args_STRUCT_SIZE;
  destroy.error = error;
  api_->error_destroy(&destroy);
  if (failed != nullptr) {
    destroy.error = failed;
    api_->error_destroy(&destroy);
    code.code = TPD_INTERNAL;
  }
  throw DriverError(code.code, message);
}

}  // namespace torchplug::driver
