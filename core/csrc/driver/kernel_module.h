#pragma once
// The core's device kernels on one runtime (device_kernels/kernel_abi.h): the
// image of the driver's kernel-module format that ships with the core
// (device_kernels/<format>.so in its folder), loaded into the devices on
// first use, and its functions, each looked up once. No torch header here.
#include <mutex>
#include <string>
#include <unordered_map>

#include "torchplug/driver.h"

namespace torchplug::driver {

class DeviceRuntime;

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
