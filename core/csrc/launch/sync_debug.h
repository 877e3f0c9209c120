#pragma once
// torch.<device>.set_sync_debug_mode(): flag operations that make the host
// wait for the device (blocking copies between host and device, reading a
// scalar back), as torch.cuda.set_sync_debug_mode does for CUDA. Such waits
// are legal but stall an accelerator's pipeline; library authors use the mode
// to find the ones they did not mean. On a simulated device an operator that
// runs on the host also waits, for the work queued before it: the mode flags
// those too, and every wait is counted (torchplug.runtime.host_synchronizations).
#include <cstdint>

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

namespace torchplug {

enum class SyncDebugMode : int { kDefault = 0, kWarn = 1, kError = 2 };

void set_sync_debug_mode(c10::DeviceType type, SyncDebugMode mode);
SyncDebugMode sync_debug_mode(c10::DeviceType type);

enum class HostWait : int {
  // The program reads a result: item(), a blocking copy between host and device.
  kRequested = 0,
  // An operator that runs on the host waited for the work queued on the stream.
  kImplicit = 1,
  // An operator whose result's size depends on the data (nonzero, unique)
  // waited for it, as it does on CUDA: counted as requested, the program's
  // own choice of operator.
  kDataDependent = 2,
};

// Counts a wait of the host for `device` caused by `operation`, and, when
// `flag`, warns or raises about it as the mode of `device`'s type asks.
void note_host_wait(c10::Device device, HostWait kind, const char* operation, bool flag = true);

struct HostWaitCounts {
  uint64_t requested = 0;
  uint64_t implicit = 0;
};

// The waits counted on devices of `type` since the process started or the last reset.
HostWaitCounts host_wait_counts(c10::DeviceType type);
void reset_host_wait_counts(c10::DeviceType type);

}  // namespace torchplug
