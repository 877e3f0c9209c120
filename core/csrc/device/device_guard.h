#pragma once
#include <c10/core/DeviceType.h>

namespace torchplug {

// Registers the device guard (current device, streams, events) for `type`.
void register_device_guard(c10::DeviceType type);

}  // namespace torchplug
