#pragma once
// Launching a function loaded into a device (driver/kernel_module.h) on the
// device's current stream: the core's device kernels and compiled code alike.
#include <cstddef>

#include <c10/core/Device.h>

#include "torchplug/driver.h"

namespace torchplug {

// Queues `function` with `args` (copied before it returns) on `device`'s
// current stream; when launches block (TORCHPLUG_LAUNCH_BLOCKING=1), waits for
// it, so that a failure is raised at its launch.
void launch_device_function(c10::Device device, TPD_Function* function, const TPD_KernelArg* args, size_t count);

}  // namespace torchplug
