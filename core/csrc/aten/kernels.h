#pragma once
#include <c10/core/DeviceType.h>

namespace torchplug {

// Registers the native kernels (allocation, views, copies) and the aliasing
// CPU fallback for every other operator on `type`'s dispatch key.
void register_kernels(c10::DeviceType type);

}  // namespace torchplug
