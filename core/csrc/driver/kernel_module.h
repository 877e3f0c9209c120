#pragma once
// Code that runs inside a runtime's devices, loaded through the driver's
// kernel-module extension: the core's device kernels
// (device_kernels/kernel_abi.h), whose image of the driver's format ships with
// the core (device_kernels/<format>.so in its folder), loaded on first use
// with each function looked up once; and images made at run time (Inductor's
// generated kernels). No torch header here.
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

#include "torchplug/driver.h"

namespace torchplug::driver {

class DeviceRuntime;

// The image format `runtime`'s driver loads (TPD_KernelModulesExtension's
// image_format); null when it loads no kernel modules.
const char* kernel_image_format(const DeviceRuntime& runtime);

// Loads `image` into `runtime`'s devices and returns its function `name`. The
// module stays loaded while the process runs, as the core's own does. Throws
// DriverError when the driver loads no modules or refuses the image or name.
TPD_Function* load_function(DeviceRuntime& runtime, const void* image, size_t size, const char* name);

class KernelModule {
 public:
  // The module of `runtime`, loaded on first call; null when its driver loads
  // no kernel modules, or modules of a format the core ships no image for.
  // Throws DriverError when the driver refuses the image.
  static KernelModule* of(DeviceRuntime& runtime);

  // The function named `name` (one of kernel_abi.h's constants: looked up by
  // address); throws DriverError when the image has none.
  TPD_Function* function(const char* name);

 private:
  KernelModule(DeviceRuntime& runtime, TPD_Module* module) : runtime_(runtime), module_(module) {}

  DeviceRuntime& runtime_;
  TPD_Module* const module_;
  std::mutex mutex_;
  std::unordered_map<const char*, TPD_Function*> functions_;
};

}  // namespace torchplug::driver
