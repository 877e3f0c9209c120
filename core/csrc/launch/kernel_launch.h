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
// Kernels whose output shapes are known before they run go through
// launch_kernel instead, which queues them on the stream (asynchronous
// execution, as on real hardware) and does the same on the stream's worker.
// Whatever must see every kernel belongs here, not in the kernels.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <c10/core/Storage.h>

#include "launch/sync_debug.h"
#include "launch/worker_thread.h"
#include "profiler/device_activity.h"
#include "driver/memory_access.h"

namespace torchplug {

struct LaunchOptions {
  ActivityKind kind = ActivityKind::kKernel;
  // A second device the work reads or writes (a copy between two devices).
  std::optional<c10::Device> peer = std::nullopt;
  // The host waits for the result (blocking copies to the host, item()).
  bool host_waits = false;
  // Why, when it does: the program reads a result, or the result's size
  // depends on the data (nonzero).
  HostWait host_wait_cause = HostWait::kRequested;
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
  RunningKernelMark running_;  // what the kernel launches runs inline: it reads the results at once
  driver::MemoryAccess access_;
  DeviceActivity activity_;
};

// A blocking copy the driver runs on `device`'s current stream (pinned host
// memory): the host waits for it there, as it does for cudaMemcpy.
void wait_for_queued_copy(const char* name, c10::Device device);

// True when kernels run as they are launched: TORCHPLUG_LAUNCH_BLOCKING=1 (a
// debugging aid, like CUDA_LAUNCH_BLOCKING) and strict memory mode.
bool launch_blocking();

// Whether the CPU's loops may run over `device`'s tensors as they are: the
// device's memory is host memory (host-addressable) its TensorIterator reads
// (not hpu, whose kernels have no stub slot), and strict memory mode is off.
bool runs_over_device_memory(c10::Device device);

// Whether a kernel on `device` touching about `work` elements is queued on
// the current stream (asynchronous execution) rather than run at once: not
// when launches block, and not a tiny kernel (a few elements) whose stream is
// idle (queueing it would cost more than running it; running it keeps the order).
bool queues_kernel(c10::Device device, int64_t work);
// Queues `body` on `device`'s current stream; an error it raises there
// surfaces at the next synchronizing call, naming operator `name`. `kind`
// is what torch.profiler shows it as. Once it ran, `body` is destroyed on a
// launching thread, never on the stream's worker (see kernel_launch.cpp).
void enqueue_kernel(const char* name, c10::Device device, std::function<void()> body,
                    ActivityKind kind = ActivityKind::kKernel);
// Raises the failure torchplug.runtime.inject_kernel_failures asked for, if any.
void fail_if_injected(const char* name, c10::Device device);

// What a queued kernel keeps of its tensor arguments: views of their device
// memory that do not own it, so the memory is freed when the program drops
// the tensor, as with CUDA's stream-ordered allocator (the allocator keeps
// freed memory mapped while kernels are queued). Tensors it cannot view so
// (host tensors, memory of other owners) are kept whole. Views of one device
// storage share one unowned storage, so the kernel sees its operands alias
// (and overlap) exactly as they do.
class QueuedViews {
 public:
  at::Tensor view(const at::Tensor& tensor);

 private:
  c10::SmallVector<std::pair<const c10::StorageImpl*, c10::Storage>, 4> storages_;
};

// The unowned storages a queued kernel's views share, by the storage each stands for.
using UnownedStorages = c10::SmallVector<std::pair<const void*, c10::Storage>, 4>;

// A tensor argument of a queued kernel, kept by value: for memory of the
// device allocator, its address and layout, from which the stream's worker
// makes an unowned view (as QueuedViews does) when the kernel runs, so the
// launching thread allocates nothing for it. A tensor it cannot keep so (a
// host tensor, memory of another owner) it keeps whole.
class KeptTensor {
 public:
  explicit KeptTensor(const at::Tensor& tensor);
  // The tensor, on the worker; views of one storage share `storages`' unowned one.
  at::Tensor view(UnownedStorages& storages) const;

 private:
  at::Tensor whole_;  // undefined, a host tensor, or memory of another owner
  const void* storage_ = nullptr;  // the storage's identity: operands alias as they do
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  c10::Device device_{c10::kCPU};
  caffe2::TypeMeta dtype_;
  int64_t offset_ = 0;
  c10::SmallVector<int64_t, 5> sizes_;
  c10::SmallVector<int64_t, 5> strides_;
  bool conj_ = false;
  bool neg_ = false;
};

template <typename T>
struct is_array_ref : std::false_type {};
template <typename T>
struct is_array_ref<c10::ArrayRef<T>> : std::true_type {};

// An optional list of ints a queued kernel keeps (an OptionalIntArrayRef
// refers to the caller's list), handed to the kernel as one again.
struct KeptIntList {
  std::optional<std::vector<int64_t>> values;
  operator at::OptionalIntArrayRef() const {  // NOLINT(google-explicit-constructor): stands in for the argument
    return values.has_value() ? at::OptionalIntArrayRef(*values) : at::OptionalIntArrayRef();
  }
};

template <typename T>
auto kept_for_queue(const T& argument) {
  static_assert(!is_array_ref<T>::value, "a queued kernel cannot keep an ArrayRef argument; copy it into a vector");
  if constexpr (std::is_same_v<T, at::OptionalIntArrayRef>) {
    return argument.has_value() ? KeptIntList{argument->vec()} : KeptIntList{};
  } else if constexpr (std::is_same_v<T, at::Tensor>) {
    return KeptTensor(argument);
  } else if constexpr (std::is_same_v<T, std::optional<at::Tensor>>) {
    return argument.has_value() ? std::optional<KeptTensor>(KeptTensor(*argument)) : std::optional<KeptTensor>();
  } else {
    return argument;
  }
}

// What the kernel is handed for a kept argument, on the worker.
template <typename T>
decltype(auto) queued_argument(UnownedStorages& storages,
                               const T& kept) {
  if constexpr (std::is_same_v<T, KeptTensor>) {
    return kept.view(storages);
  } else if constexpr (std::is_same_v<T, std::optional<KeptTensor>>) {
    return kept.has_value() ? std::optional<at::Tensor>(kept->view(storages)) : std::optional<at::Tensor>();
  } else {
    return (kept);
  }
}

// A kernel of operator `name` on `device`, after the work queued on the
// device's current stream: queued there (see queues_kernel) as
// `body(kept...)`, over what kept_for_queue keeps of `args`, or run at once
// as `run_now()`. A kernel whose caller already prepared it here (a
// structured kernel whose meta function built its iterator) runs that at
// once; `body` must prepare it again, over the kept arguments.
template <typename RunNow, typename Body, typename... Args>
void launch_prepared_kernel(const char* name, c10::Device device, int64_t work, RunNow run_now, Body body,
                            const Args&... args) {
  if (!queues_kernel(device, work)) {
    const KernelLaunch launch(name, device);
    run_now();
    return;
  }
  auto kept = std::make_tuple(kept_for_queue(args)...);
  enqueue_kernel(name, device, [body = std::move(body), kept = std::move(kept)] {
    UnownedStorages storages;
    std::apply([&](const auto&... each) { body(queued_argument(storages, each)...); }, kept);
  });
}

// The same for a kernel with nothing prepared: `body(args...)` at once.
template <typename Body, typename... Args>
void launch_kernel(const char* name, c10::Device device, int64_t work, Body body, const Args&... args) {
  launch_prepared_kernel(name, device, work, [&] { body(args...); }, body, args...);
}

// The storages of the host-addressable device tensors among `tensors`, in strict mode only.
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
