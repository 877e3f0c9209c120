#pragma once
#include <c10/core/DeviceType.h>

namespace torchplug {

// torch.autocast for `type` (PrivateUse1 or HPU): CUDA's per-operator cast
// policies on the device type's Autocast key. Idempotent.
void register_autocast(c10::DeviceType type);

}  // namespace torchplug
