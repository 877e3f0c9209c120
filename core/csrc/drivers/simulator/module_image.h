#pragma once
// A kernel module the simulator loaded (TPD_KERNEL_FORMAT_HOST_ELF: a shared
// object for the host, loaded from a memory file by modules.cpp) and a
// function of it, as a client keeps them (handles.h).
#include <dlfcn.h>

#include <memory>
#include <string>
#include <utility>

#include "torchplug/driver.h"

namespace torchplug::simulator {

// A loaded image, unloaded when the last function and queued launch of it are
// gone. The dynamic loader knows it by the name it was opened with,
// /proc/self/fd/<memory file>, and would hand it back for any later image
// opened under that name: the memory file stays open while the image is
// loaded, so that no other image's file takes its number.
class LoadedModule {
 public:
  LoadedModule(void* library, int file, std::string name)
      : library_(library), file_(file), name_(std::move(name)) {}
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  void* library() const { return library_; }

 private:
  void* library_;
  int file_;
  std::string name_;
};

struct ModuleFunction {
  std::shared_ptr<LoadedModule> module;
  TPD_HostElfKernel entry;
  std::string name;
};

}  // namespace torchplug::simulator
