#pragma once
// The one way work enters a simulated device. Every kernel entry (the CPU
// fallback, the native and host kernels, copies, item(), and vendor kernels
// through the plugin SDK) runs inside a KernelLaunch, which
//   1. makes the kernel's device current;
//   2. orders the kernel after the work queued on the current stream of that
//      device (and of a copy's peer device);
//   3. flags a host wait in sync-debug mode (copies to the host, item());
//   4. grants strict memory mode's access to the device memory it touches;
//   5. times it as a device activity for torch.profiler.
// Whatever must see every kernel (a stream sanitizer, asynchronous execution)
// belongs here, not in the kernels.
#include <initializer_list>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

#include "aten/device_activity.h"
#include "runtime/memory_guard.h"

namespace torchplug {

struct LaunchOptions {
  ActivityKind kind = ActivityKind::kKernel;
  // A second device the work reads or writes (a copy between two devices).
  std::optional<c10::Device> peer = std::nullopt;
  // The host waits for the result (blocking copies to the host, item()).
  bool host_waits = false;
};

class KernelLaunch {
 public:
  // `memory`: the device allocations the kernel touches; only strict mode
  // needs them, and callers collect them only there (see touched_memory).
  KernelLaunch(const char* name, c10::Device device, const std::vector<const void*>& memory = {},
               LaunchOptions options = {});

  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;

 private:
  // Runs in the constructor's member initialisation, between the guard and the access grant.
  struct StreamOrder {
    StreamOrder(const char* name, c10::Device device, const LaunchOptions& options);
  };

  c10::DeviceGuard guard_;
  StreamOrder order_;
  runtime::KernelAccess access_;
  DeviceActivity activity_;
};

// The storages of the device tensors among `tensors`, in strict mode only.
std::vector<const void*> touched_memory(std::initializer_list<const at::Tensor*> tensors);

// torch's error for operands on two devices, naming the operator.
[[noreturn]] void different_devices(const char* op, c10::Device first, c10::Device second);

}  // namespace torchplug
