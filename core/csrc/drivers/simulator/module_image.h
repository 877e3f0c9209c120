#pragma once
// A kernel module the simulator loaded (TPD_KERNEL_FORMAT_HOST_ELF: a shared
// object for the host, loaded from a memory file by modules.cpp) and a
// function of it, as a client keeps them (handles.h).
#include <dlfcn.h>

#include <memory>
#include <string>

#include "torchplug/driver.h"

namespace torchplug::simulator {

// A loaded image, unloaded when the last function and queued launch of it are gone.
class LoadedModule {
 public:
  explicit LoadedModule(void* library) : library_(library) {}
  ~LoadedModule() { ::dlclose(library_); }
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  void* library() const { return library_; }

 private:
  void* library_;
};

struct ModuleFunction {
  std::shared_ptr<LoadedModule> module;
  TPD_HostElfKernel entry;
  std::string name;
};

}  // namespace torchplug::simulator
