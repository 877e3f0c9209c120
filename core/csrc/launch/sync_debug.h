#pragma once
// torch.<device>.set_sync_debug_mode(): flag operations that make the host
// wait for the device (blocking copies between host and device, reading a
// scalar back), as torch.cuda.set_sync_debug_mode does for CUDA. Such waits
// are legal but stall an accelerator's pipeline; library authors use the mode
// to find the ones they did not mean.
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

namespace torchplug {

enum class SyncDebugMode : int { kDefault = 0, kWarn = 1, kError = 2 };

void set_sync_debug_mode(c10::DeviceType type, SyncDebugMode mode);
SyncDebugMode sync_debug_mode(c10::DeviceType type);

// Warns or raises, as the mode of `device`'s type asks, that `operation` makes
// the host wait for `device`.
void check_synchronizing_operation(c10::Device device, const char* operation);

}  // namespace torchplug
