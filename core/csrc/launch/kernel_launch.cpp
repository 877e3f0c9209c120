#include "launch/kernel_launch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <stdexcept>
#include <utility>

#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/core/TensorBody.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "backend/backend.h"
#include "memory/device_allocator.h"
#include "memory/host_alias.h"
#include "memory/worker_scratch.h"
#include "launch/sync_debug.h"
#include "launch/worker_thread.h"

namespace torchplug {
namespace {

// A kernel touching fewer elements than this (a scalar's arithmetic, a
// few-element tensor's) runs at once when its stream is idle: queueing it
// would cost the host more than the whole kernel, and running it keeps the
// order. Every other kernel is queued: the host then only issues work (no
// iterator loops, no arithmetic), and goes on while the stream runs it.
constexpr int64_t kQueuedWorkThreshold = 16;

// A queued kernel: the closure and what its run needs, in one allocation,
// handed to the driver as its host function's data.
struct QueuedKernel {
  std::function<void()> body;
  const char* name;
  c10::Stream stream;
  ActivityKind kind;
  uint64_t correlation;
  bool launched_while_tracing;
  int threads;
  uint64_t issue = 0;  // its place in the stream's order, or an earlier one (running_kernel_issue)
  QueuedKernel* next_retired = nullptr;  // in `retired`
};

// Queued kernels that ran, handed back by the workers for a launching thread
// to destroy, for two reasons. What a kernel keeps whole (a Python number's
// tensor) may be the last reference to a tensor Python knew, whose release
// needs the GIL, which a worker must never wait for (the host may hold it
// while it waits for the worker). And the kernel's memory came from the
// launching thread's malloc arena: a worker freeing it takes that arena's
// lock while the host allocates, and every collision put one thread to
// sleep and made the other wake it (a system call, and on virtual machines
// an interrupt to the sleeping core), which made whole training steps up to
// 1.5x slower. A lock-free stack: workers push, a host thread takes them all.
std::atomic<QueuedKernel*> retired{nullptr};

void retire(std::unique_ptr<QueuedKernel> kernel) {
  QueuedKernel* top = kernel.release();
  top->next_retired = retired.load(std::memory_order_relaxed);
  while (!retired.compare_exchange_weak(top->next_retired, top, std::memory_order_release,
                                        std::memory_order_relaxed)) {
  }
}

void drop_retired_kernels() {
  if (on_stream_worker_thread() || retired.load(std::memory_order_relaxed) == nullptr) {
    return;
  }
  QueuedKernel* next = retired.exchange(nullptr, std::memory_order_acquire);
  while (next != nullptr) {
    const std::unique_ptr<QueuedKernel> dropping(next);
    next = dropping->next_retired;
  }
}

bool launch_blocking_requested() {
  const char* value = std::getenv("TORCHPLUG_LAUNCH_BLOCKING");
  if (value == nullptr) {
    return false;
  }
  const std::string text(value);
  return text == "1" || text == "true" || text == "yes" || text == "on";
}

// The state a queued kernel runs in on the worker: its device and stream
// current (for what it allocates and launches), below autograd as every
// backend kernel runs, and never back into Python.
class QueuedKernelScope {
 public:
  explicit QueuedKernelScope(c10::Stream stream)
      : device_(stream.device()),
        excluded_(c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                       c10::DispatchKey::PythonDispatcher})),
        on_worker_(RunningKernel::kQueuedOnWorker) {
    set_current_stream(stream);
  }
  QueuedKernelScope(const QueuedKernelScope&) = delete;
  QueuedKernelScope& operator=(const QueuedKernelScope&) = delete;

 private:
  c10::DeviceGuard device_;
  at::AutoDispatchBelowADInplaceOrView below_autograd_;
  c10::impl::ExcludeDispatchKeyGuard excluded_;
  // What the kernel launches in turn (a CPU kernel dispatching a copy) runs inline, in order.
  RunningKernelMark on_worker_;
};

// What a queued kernel's failure reports at the next synchronizing call: the
// driver takes it as the host function's message.
std::string asynchronous_failure(const char* name, c10::Stream stream, const std::exception& error) {
  const c10::Error* torch_error = dynamic_cast<const c10::Error*>(&error);
  const std::string reason = torch_error != nullptr ? torch_error->what_without_backtrace() : error.what();
  return c10::str("Kernel ", name, " failed on ", stream.device(), " (stream ", stream.id(), "): ", reason,
                  "\nKernels run asynchronously, so this error surfaced at a later synchronizing call, not where ",
                  name, " was launched. Set TORCHPLUG_LAUNCH_BLOCKING=1 to raise it at the launch.");
}

constexpr const char* kInjectedFailure = "injected kernel failure (torchplug.runtime.inject_kernel_failures)";

// A queued kernel computes with as many intra-op threads as its launching
// thread would (torch.set_num_threads applies to the thread that calls it):
// the CPU's reductions and matrix products split work, and round, by it, and
// some pick their algorithm by it (oneDNN or not for a small convolution).
// The worker's count is read, not remembered: torch sets a thread's count at
// its first parallel loop to the last one any thread set, and a DataLoader's
// pin-memory thread sets 1 for itself, so a worker that had run only the
// device's own kernels took 1 there, inside a CPU kernel, and kept it.
void use_intra_op_threads(int threads) {
  if (at::get_num_threads() != threads) {
    at::set_num_threads(threads);
  }
}

void run_queued_kernel(const QueuedKernel& kernel) {
  use_intra_op_threads(kernel.threads);
  const c10::Stream stream = kernel.stream;
  const QueuedKernelScope scope(stream);
  const DeviceActivity activity(kernel.name, stream.device(), kernel.kind, stream.id(), kernel.correlation,
                                kernel.launched_while_tracing);
  set_running_kernel_issue(kernel.issue);
  TORCH_CHECK(!device_runtime(stream.device_type()).take_kernel_failure(stream.device_index()), kInjectedFailure);
  kernel.body();
}

}  // namespace

bool launch_blocking() {
  static const bool requested = launch_blocking_requested();
  return requested || driver::strict_memory();
}

bool runs_over_device_memory(c10::Device device) {
  const BackendIdentity& identity = backend(device.type());
  return !driver::strict_memory() && identity.kind->iterator_sees_data && identity.host_addressable;
}

bool queues_kernel(c10::Device device, int64_t work) {
  if (on_stream_worker_thread() || running_kernel_at_launch()) {
    return false;
  }
  const driver::Stream& stream = translate_runtime_errors([&]() -> const driver::Stream& {
    return runtime_stream(current_stream(device));
  });
  if (stream.capturing()) {
    return true;  // a graph records what is queued; a kernel run now would be missing from it
  }
  if (launch_blocking()) {
    return false;
  }
  return work >= kQueuedWorkThreshold || !translate_runtime_errors([&] { return stream.query(); });
}

void fail_if_injected(const char* name, c10::Device device) {
  if (!on_stream_worker_thread()) {  // a kernel a queued kernel launches is part of it
    TORCH_CHECK(!device_runtime(device.type()).take_kernel_failure(device.index()), "Kernel ", name, " failed on ",
                device, ": ", kInjectedFailure);
  }
}

namespace {

// What a queued kernel's failure says, or empty when it ran.
std::string run_or_describe_failure(const QueuedKernel& kernel) {
  try {
    run_queued_kernel(kernel);
    return {};
  } catch (const std::exception& error) {
    return asynchronous_failure(kernel.name, kernel.stream, error);
  } catch (...) {
    return c10::str("Kernel ", kernel.name, " failed on ", kernel.stream.device(), " with an unknown exception.");
  }
}

// The driver host function of a queued kernel: runs it once, and hands it
// back to the launching threads (see `retired`).
int run_queued_kernel_once(void* user_data, char* message, size_t message_size) {
  std::unique_ptr<QueuedKernel> kernel(static_cast<QueuedKernel*>(user_data));
  const std::string failure = run_or_describe_failure(*kernel);
  retire(std::move(kernel));
  if (failure.empty()) {
    return 0;
  }
  std::strncpy(message, failure.c_str(), message_size - 1);
  message[message_size - 1] = '\0';
  return 1;
}

}  // namespace

void enqueue_kernel(const char* name, c10::Device device, std::function<void()> body, ActivityKind kind) {
  // A process that exits with kernels queued lets them finish before its
  // statics (which the kernels use) are destroyed.
  static const bool waits_at_exit = std::atexit([] {
    try {
      driver::DeviceRuntime::wait_for_all_streams();
    } catch (...) {  // NOLINT(bugprone-empty-catch): an exception from an atexit handler terminates
    }
  }) == 0;
  (void)waits_at_exit;
  cache_worker_scratch();
  drop_retired_kernels();
  const c10::Stream stream = current_stream(device);
  auto kernel = std::make_unique<QueuedKernel>(
      QueuedKernel{std::move(body), name, stream, kind, current_correlation_id(), device_tracing(),
                   at::get_num_threads()});
  const driver::Stream& queue = runtime_stream(stream);
  // Read before the launch: work other threads queue meanwhile only makes
  // the kernel's real place later, so this errs on the safe side.
  kernel->issue = queue.issued() + 1;
  translate_runtime_errors([&] {
    if (queue.launch_host_function(&run_queued_kernel_once, kernel.get())) {
      kernel.release();  // the host function owns it now
      return;
    }
    // A graph captures the stream: it keeps the kernel and replays it, so the
    // kernel is never retired; each replay is a launch, traced if a session records it.
    kernel->launched_while_tracing = true;
    queue.enqueue([kept = std::shared_ptr<QueuedKernel>(std::move(kernel))] {
      const std::string failure = run_or_describe_failure(*kept);
      if (!failure.empty()) {
        throw std::runtime_error(failure);
      }
    });
  });
}

at::Tensor QueuedViews::view(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    return tensor;
  }
  if (tensor.device().is_cpu() || !tensor.has_storage() ||
      !allocated_by_device_allocator(tensor.storage().data_ptr())) {
    return tensor;
  }
  const c10::Storage& storage = tensor.storage();
  const c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  for (const auto& [known, unowned] : storages_) {
    if (known == impl) {
      return device_view(unowned, tensor, device_key_set(tensor.device().type()));
    }
  }
  c10::Storage unowned(c10::Storage::use_byte_size_t(), storage.nbytes(),
                       c10::DataPtr(storage.unsafeGetStorageImpl()->mutable_data(), tensor.device()),
                       /*allocator=*/nullptr, /*resizable=*/false);
  storages_.emplace_back(impl, unowned);
  return device_view(unowned, tensor, device_key_set(tensor.device().type()));
}

KeptTensor::KeptTensor(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    return;
  }
  if (tensor.device().is_cpu() || !tensor.has_storage() ||
      !allocated_by_device_allocator(tensor.storage().data_ptr())) {
    whole_ = tensor;
    return;
  }
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage_ = storage;
  data_ = storage->mutable_data();
  nbytes_ = storage->nbytes();
  device_ = tensor.device();
  dtype_ = tensor.dtype();
  offset_ = tensor.storage_offset();
  sizes_.assign(tensor.sizes().begin(), tensor.sizes().end());
  strides_.assign(tensor.strides().begin(), tensor.strides().end());
  conj_ = tensor.is_conj();
  neg_ = tensor.is_neg();
}

at::Tensor KeptTensor::view(UnownedStorages& storages) const {
  if (storage_ == nullptr) {
    return whole_;
  }
  const c10::Storage* unowned = nullptr;
  for (const auto& [known, made] : storages) {
    if (known == storage_) {
      unowned = &made;
    }
  }
  if (unowned == nullptr) {
    storages.emplace_back(storage_, c10::Storage(c10::Storage::use_byte_size_t(), nbytes_, c10::DataPtr(data_, device_),
                                                 /*allocator=*/nullptr, /*resizable=*/false));
    unowned = &storages.back().second;
  }
  const c10::DispatchKeySet math_bits{c10::DispatchKey::Conjugate, c10::DispatchKey::Negative};
  auto view = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(*unowned),
                                                       device_key_set(device_.type()) - math_bits, dtype_);
  view.unsafeGetTensorImpl()->set_sizes_and_strides(sizes_, strides_, offset_);
  view.unsafeGetTensorImpl()->_set_conj(conj_);
  view.unsafeGetTensorImpl()->_set_neg(neg_);
  return view;
}

namespace {

// What a launch does before its kernel runs.
// Refuses work that would run now, on the host, while `device`'s current
// stream captures a graph: the graph would miss it (and waiting for the
// stream would wait for work that runs only at a replay).
void check_not_capturing(const char* name, c10::Device device) {
  const bool capturing =
      translate_runtime_errors([&] { return runtime_stream(current_stream(device)).capturing(); });
  TORCH_CHECK(!capturing, name, " cannot run while ", device,
              "'s current stream is capturing a graph: it would run now, on the host, and the graph would not "
              "replay it. Keep host reads (item(), .cpu(), printing a tensor) and synchronization out of the "
              "captured code, and run that code once before capturing it (a warm-up, as CUDA graphs need): "
              "torchplug queues an operator only once a call of the same shapes has run.");
}

void order_after_queued_work(const char* name, c10::Device device, const LaunchOptions& options) {
  if (on_stream_worker_thread()) {
    return;  // launched by a queued kernel: its stream's order already holds
  }
  check_not_capturing(name, device);
  if (options.peer.has_value() && *options.peer != device) {
    check_not_capturing(name, *options.peer);
  }
  drop_retired_kernels();
  if (options.host_waits) {
    note_host_wait(device, options.host_wait_cause, name);
    // The host reads a result: a kernel that failed on any stream of the
    // device is reported here, as CUDA reports a sticky error at item().
    raise_pending_kernel_errors(device);
  }
  bool waited = wait_for_current_stream(device);
  if (options.peer.has_value() && *options.peer != device) {
    waited = wait_for_current_stream(*options.peer) || waited;
  }
  if (waited && !options.host_waits) {
    // With launches blocking (TORCHPLUG_LAUNCH_BLOCKING, strict memory) every
    // kernel runs at its launch: the waits come with the mode, not the program.
    note_host_wait(device, HostWait::kImplicit, name, /*flag=*/!launch_blocking());
  }
}

}  // namespace

void wait_for_queued_copy(const char* name, c10::Device device) {
  order_after_queued_work(name, device, {ActivityKind::kMemcpy, std::nullopt, /*host_waits=*/true});
}

KernelLaunch::StreamOrder::StreamOrder(const char* name, c10::Device device, const LaunchOptions& options) {
  order_after_queued_work(name, device, options);
}

KernelLaunch::KernelLaunch(const char* name, c10::Device device, const std::vector<const void*>& memory,
                           LaunchOptions options)
    : guard_(device),
      order_(name, device, options),
      running_(RunningKernel::kAtLaunch),
      access_(memory),
      activity_(name, device, options.kind) {
  if (options.kind != ActivityKind::kMemcpy) {
    // Every kernel that runs at its launch (the fallback's, hpu's, vendor
    // and compiled kernels) can fail as a faulting kernel does: here.
    fail_if_injected(name, device);
  }
}

std::vector<const void*> touched_memory(std::initializer_list<const at::Tensor*> tensors) {
  std::vector<const void*> memory;
  if (!driver::strict_memory()) {
    return memory;
  }
  for (const at::Tensor* tensor : tensors) {
    // Memory the host cannot address is never opened to it: only the driver's copies reach it.
    if (tensor->defined() && !tensor->device().is_cpu() && tensor->has_storage() &&
        backend(tensor->device().type()).host_addressable) {
      memory.push_back(tensor->storage().data());
    }
  }
  return memory;
}

namespace {

[[noreturn]] void different_devices(const char* op, c10::Device first, c10::Device second) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", first,
              " and ", second, "! (in ", op, "; move the tensors to one device with .to(device) first)");
}

}  // namespace

void KernelDevice::note(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    return;
  }
  const c10::Device device = tensor.device();
  if (device.is_cpu()) {
    host_operand_ = host_operand_ || tensor.dim() > 0;
    return;
  }
  note(device);
}

void KernelDevice::note(const at::Tensor& tensor, const char* argument) {
  if (!tensor.defined()) {
    return;
  }
  if (!device_.has_value()) {
    device_ = tensor.device();
  } else if (*device_ != tensor.device()) {
    c10::impl::common_device_check_failure(*device_, tensor, op_, argument);
  }
}

void KernelDevice::note(c10::Device device) {
  if (!device_.has_value()) {
    device_ = device;
  } else if (*device_ != device) {
    different_devices(op_, *device_, device);
  }
}

c10::Device KernelDevice::device() const {
  TORCH_CHECK(device_.has_value() && !device_->is_cpu(), op_,
              " reached a simulated device without a device tensor or device argument.");
  if (host_operand_) {
    different_devices(op_, *device_, c10::Device(c10::kCPU));
  }
  return *device_;
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  const c10::Device device = storage.device();
  c10::DataPtr fresh = [&] {
    const c10::DeviceGuard guard(device);  // the allocator serves the current device
    return impl->allocator()->allocate(nbytes);
  }();
  const size_t kept = std::min(nbytes, impl->nbytes());
  if (kept > 0 && !backend(device.type()).host_addressable) {
    // Memory the host cannot address is copied by the driver, in stream order.
    const KernelLaunch launch("Memcpy DtoD", device, {}, {ActivityKind::kMemcpy});
    translate_runtime_errors([&] {
      runtime_stream(current_stream(device)).copy_async(fresh.get(), impl->data(), kept, TPD_COPY_DEVICE_TO_DEVICE);
    });
  } else if (kept > 0) {
    std::vector<const void*> memory;
    if (driver::strict_memory()) {
      memory = {fresh.get(), impl->data()};
    }
    const KernelLaunch launch("Memcpy DtoD", device, memory, {ActivityKind::kMemcpy});
    std::memcpy(fresh.get(), impl->data(), kept);
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(nbytes);
}

}  // namespace torchplug
