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

// The device a kernel runs on, found from its operands. As in torch's own
// device kernels, every device operand must be on it, and no host operand but
// a scalar may join them: the CPU kernel underneath would read a host operand
// happily (device memory is host memory) and hide a device mix-up the user
// must see. Raises torch's same-device error, naming the operator.
class KernelDevice {
 public:
  explicit KernelDevice(const char* op) : op_(op) {}

  // An operand: undefined ones and 0-dim CPU ones (scalars) do not count.
  void note(const at::Tensor& tensor);
  // An operand, checked as torch's generated device checks of CUDA kernels
  // do: every defined operand, CPU scalars included, must be on the first
  // one's device, and the error names the `argument`.
  void note(const at::Tensor& tensor, const char* argument);
  // A device the kernel must run on (a device operand's, a device argument's).
  void note(c10::Device device);
  bool found() const { return device_.has_value(); }
  // The device, once every operand is noted.
  c10::Device device() const;

 private:
  const char* op_;
  std::optional<c10::Device> device_;
  bool host_operand_ = false;
};

// Resizes a device storage to `nbytes` bytes, keeping what fits of its
// contents (resize_, Storage.resize_): a fresh allocation on the storage's
// device, filled by a copy that is a kernel of that device.
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes);

}  // namespace torchplug
