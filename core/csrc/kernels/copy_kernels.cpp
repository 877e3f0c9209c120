// Copies between host and device and across devices, and reading a scalar
// back to the host: the kernels that move data over the (simulated) bus.
#include "kernels/dispatch_stubs.h"  // before any ATen header: it declares copy_stub's kernel slots

#include <array>

#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Copy.h>
#include <ATen/ops/_copy_from_and_resize_ops.h>
#include <ATen/ops/_copy_from_ops.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/copy.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/resolve_conj.h>
#include <ATen/ops/resolve_neg.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "backend/backend.h"
#include "kernels/device_copy.h"
#include "profiler/device_activity.h"
#include "memory/host_alias.h"
#include "memory/host_allocator.h"
#include "memory/host_mirror.h"
#include "launch/kernel_launch.h"
#include "launch/worker_thread.h"
#include "driver/memory_access.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

bool is_device(const at::Tensor& tensor) { return !tensor.device().is_cpu(); }

// Profiler names of copies, as CUDA traces show them.
const char* copy_name(const at::Tensor& src, const at::Tensor& dst) {
  if (!is_device(src)) {
    return "Memcpy HtoD";
  }
  return is_device(dst) ? "Memcpy DtoD" : "Memcpy DtoH";
}

at::Tensor host_view(HostAliases& aliases, const at::Tensor& tensor) {
  return is_device(tensor) ? aliases.alias(tensor) : tensor;
}

// A plain byte copy is possible: same dtype, same dense layout, no broadcast.
bool bytewise_copyable(const at::Tensor& src, const at::Tensor& dst) {
  return src.dtype() == dst.dtype() && src.sizes() == dst.sizes() && src.is_contiguous() &&
         dst.is_contiguous() && !src.is_conj() && !dst.is_conj() && !src.is_neg() && !dst.is_neg();
}

// Copies from pinned host memory to a device, or back, are the driver's (a
// copy engine's, on hardware) on the device's current stream, and return at
// once, like cudaMemcpyAsync.
bool try_async_copy(const at::Tensor& src, const at::Tensor& dst) {
  const bool to_device = is_device(dst) && !is_device(src);
  const bool to_host = is_device(src) && !is_device(dst);
  if (!(to_device || to_host) || !bytewise_copyable(src, dst)) {
    return false;
  }
  const at::Tensor& host = to_device ? src : dst;
  const at::Tensor& device = to_device ? dst : src;
  if (!is_pinned_host_pointer(host.data_ptr())) {
    return false;
  }
  driver::DeviceRuntime& runtime = device_runtime(device.device().type());
  const driver::Stream& stream = runtime_stream(current_stream(device.device()));
  const bool traced = device_tracing();
  const void* src_ptr = src.const_data_ptr();
  void* dst_ptr = dst.mutable_data_ptr();
  const size_t bytes = src.nbytes();
  // The driver copies memory it allocated; memory the allocator adopted from
  // the host (a fallback kernel's result) is copied by a host function, which
  // host-addressable memory allows (open_backend_driver refuses other drivers).
  const bool driver_memory = runtime.device_of(device.const_data_ptr()) >= 0;
  translate_runtime_errors([&] {
    auto start = std::make_shared<int64_t>(0);
    if (traced) {
      stream.enqueue([start] { *start = activity_clock_ns(); });
    }
    if (driver_memory) {
      stream.copy_async(dst_ptr, src_ptr, bytes, to_device ? TPD_COPY_HOST_TO_DEVICE : TPD_COPY_DEVICE_TO_HOST);
    } else {
      stream.enqueue([src_ptr, dst_ptr, bytes] {
        const driver::MemoryAccess access{dst_ptr, src_ptr};
        std::memcpy(dst_ptr, src_ptr, bytes);
      });
    }
    // Holds both storages so neither is freed while the copy is queued.
    stream.enqueue([src_storage = src.storage(), dst_storage = dst.storage(), traced, start,
                    name = copy_name(src, dst), on = device.device(), stream_id = stream.id(),
                    correlation = current_correlation_id()] {
      if (traced) {
        record_activity({name, ActivityKind::kMemcpy, on, stream_id, *start, activity_clock_ns(), correlation});
      }
    });
  });
  return true;
}

// Whether the CPU's copy loop can run over both tensors as they are: each is
// a strided CPU tensor or one of a device whose memory the loops may read,
// and no complex value loses its imaginary part (the CPU's copy_ warns of
// that, so such copies take it).
bool cpu_loop_copies(const at::Tensor& src, const at::Tensor& dst) {
  for (const at::Tensor* tensor : {&src, &dst}) {
    if (tensor->layout() != c10::kStrided || tensor->is_quantized() ||
        (is_device(*tensor) && !runs_over_device_memory(tensor->device()))) {
      return false;
    }
  }
  return !src.is_complex() || dst.is_complex();
}

// Whether the host may read and write `tensor`'s memory: a host tensor, or
// one of a device whose memory is host-addressable.
bool host_addressable(const at::Tensor& tensor) {
  const BackendIdentity* identity = is_device(tensor) ? find_backend(tensor.device().type()) : nullptr;
  return identity == nullptr || identity->host_addressable;
}

bool share_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.has_storage() && b.has_storage() && a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
}

TPD_CopyKind copy_kind(const at::Tensor& src, const at::Tensor& dst) {
  if (!is_device(src)) {
    return TPD_COPY_HOST_TO_DEVICE;
  }
  return is_device(dst) ? TPD_COPY_DEVICE_TO_DEVICE : TPD_COPY_DEVICE_TO_HOST;
}

// A copy to or from a device whose memory the host cannot address, inside
// its launch: every byte crosses through the driver. Same-layout copies are
// one driver copy; others convert on the host, between copies of the bytes
// involved.
at::Tensor copy_through_driver(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& on_device = is_device(dst) ? dst : src;
  const driver::Stream& stream = runtime_stream(current_stream(on_device.device()));
  if (bytewise_copyable(src, dst) && !share_storage(src, dst)) {
    const TPD_CopyKind kind = copy_kind(src, dst);
    translate_runtime_errors([&] {
      stream.copy_async(dst.mutable_data_ptr(), src.const_data_ptr(), src.nbytes(), kind);
      // The host waits for a blocking copy, and for any copy into pageable
      // memory (as CUDA does); a device-to-device copy keeps stream order.
      const bool to_pageable = kind == TPD_COPY_DEVICE_TO_HOST && !is_pinned_host_pointer(dst.data_ptr());
      if (kind != TPD_COPY_DEVICE_TO_DEVICE && (!non_blocking || to_pageable)) {
        stream.synchronize();
      }
    });
    return dst;
  }
  if (copy_inside_device(src, dst)) {
    return dst;
  }
  // A destination whose every byte is written (dense, no math bit, not over
  // the source's memory) is uploaded whole; any other is read, written on the
  // host and copied back.
  const bool whole_destination = is_device(dst) && dst.is_non_overlapping_and_dense() && !dst.is_conj() &&
                                 !dst.is_neg() && !share_storage(src, dst);
  HostMirrors mirrors;
  mirrors.note(src);
  if (!whole_destination) {
    mirrors.note(dst);
  }
  const at::Tensor host_src = is_device(src) ? mirrors.mirror(src) : src;
  const at::Tensor host_dst = is_device(dst) && !whole_destination ? mirrors.mirror(dst) : dst;
  mirrors.download();
  if (!is_device(dst)) {
    dst.copy_(host_src);
  } else if (whole_destination) {
    const at::Tensor staged = at::empty_strided(dst.sizes(), dst.strides(), dst.options().device(c10::kCPU));
    staged.copy_(host_src);
    translate_runtime_errors([&] {
      stream.copy_async(dst.mutable_data_ptr(), staged.const_data_ptr(), dst.nbytes(), TPD_COPY_HOST_TO_DEVICE);
    });
  } else {
    host_dst.copy_(host_src);
    mirrors.write_back(dst, host_dst);
  }
  return dst;
}

// A copy the CPU runs between host-addressable tensors.
void copy_over_device_memory(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  if (cpu_loop_copies(src, dst)) {
    // The CPU's copy_ builds this iterator (which refuses overlapping source
    // and destination) and runs this loop; over host aliases it would also
    // make two host tensors and dispatch once more, which costs a small copy
    // (a bias broadcast into a matrix product's output) twice its time.
    at::TensorIterator iter = at::TensorIteratorConfig()
                                  .add_output(dst)
                                  .add_const_input(src)
                                  .resize_outputs(false)
                                  .check_all_same_dtype(false)
                                  .check_all_same_device(false)
                                  .build();
    at::native::copy_stub(c10::kCPU, iter, non_blocking);
    return;
  }
  // One host storage for views of one device storage: the CPU's copy_ then
  // refuses overlapping source and destination as it does for CPU tensors.
  HostAliases aliases;
  at::Tensor host_dst = host_view(aliases, dst);
  host_dst.copy_(host_view(aliases, src));
}

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(src.defined() && dst.defined(), "Cannot copy an undefined tensor.");
  if (dst.numel() == 0) {
    return dst;
  }
  const bool through_driver = !host_addressable(src) || !host_addressable(dst);
  const bool within_device = is_device(src) && is_device(dst) && src.device() == dst.device();
  if (!through_driver && within_device && queues_kernel(dst.device(), dst.numel())) {
    // Queued on the stream as kernels are; what the CPU's copy_ refuses
    // (partial overlap) is refused here, at the launch.
    at::assert_no_internal_overlap(dst);
    at::assert_no_partial_overlap(dst, src);
    KeptTensor from(src);
    KeptTensor to(dst);
    enqueue_kernel(
        copy_name(src, dst), dst.device(),
        [from = std::move(from), to = std::move(to)] {
          UnownedStorages storages;
          copy_over_device_memory(from.view(storages), to.view(storages), /*non_blocking=*/false);
        },
        ActivityKind::kMemcpy);
    return dst;
  }
  // A blocking copy waits for the driver's, as cudaMemcpy does; a queued
  // kernel's own copy runs at once, in its stream's order.
  if (!through_driver && (non_blocking || !on_stream_worker_thread()) && try_async_copy(src, dst)) {
    if (!non_blocking) {
      wait_for_queued_copy(copy_name(src, dst), is_device(dst) ? dst.device() : src.device());
    }
    return dst;
  }
  for (const at::Tensor* tensor : {&src, &dst}) {
    if (is_device(*tensor)) {
      checked_device_index(tensor->device().type(), tensor->device().index());
    }
  }
  const at::Tensor& on_device = is_device(dst) ? dst : src;
  const at::Tensor& other = is_device(dst) ? src : dst;
  LaunchOptions options{ActivityKind::kMemcpy};
  if (is_device(other)) {
    options.peer = other.device();
  } else {
    options.host_waits = !non_blocking;
  }
  const KernelLaunch launch(copy_name(src, dst), on_device.device(), touched_memory({&src, &dst}), options);
  if (through_driver) {
    return copy_through_driver(src, dst, non_blocking);
  }
  copy_over_device_memory(src, dst, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.sizes() != src.sizes()) {
    dst.resize_(src.sizes());
  }
  return copy_from(src, dst, /*non_blocking=*/false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  LaunchOptions options{ActivityKind::kMemcpy};
  options.host_waits = true;
  const KernelLaunch launch("item()", self.device(), touched_memory({&self}), options);
  if (!host_addressable(self)) {
    HostMirrors mirrors;
    mirrors.note(self);
    const at::Tensor host = mirrors.mirror(self);
    mirrors.download();
    return at::_local_scalar_dense(host);
  }
  return at::_local_scalar_dense(host_alias(self));
}

bool on_torchplug_device(const at::Tensor& tensor) {
  return is_device(tensor) && find_device_runtime(tensor.device().type()) != nullptr;
}

// ATen's conjugate and negative fallbacks resolve a tensor's bit by cloning
// it, and a clone of a device tensor copies through `_copy_from`: for
// `_copy_from` itself that recursion never ends. Copies between torchplug
// devices and the host apply the bits themselves (the host aliases carry
// them), so these kernels pass the tensors on untouched; copies of other
// devices get the bits resolved before they leave, as the fallback intends.
template <c10::DispatchKey MathBit>
at::Tensor copy_from_with_math_bit(c10::DispatchKeySet keys, const at::Tensor& src, const at::Tensor& dst,
                                   bool non_blocking) {
  const c10::DispatchKeySet below = keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, MathBit);
  if (on_torchplug_device(src) || on_torchplug_device(dst)) {
    return at::_ops::_copy_from::redispatch(below, src, dst, non_blocking);
  }
  const at::Tensor resolved = MathBit == c10::DispatchKey::Conjugate ? at::resolve_conj(src) : at::resolve_neg(src);
  return at::_ops::_copy_from::call(resolved, dst, non_blocking);
}

template <c10::DispatchKey MathBit>
at::Tensor copy_from_and_resize_with_math_bit(c10::DispatchKeySet keys, const at::Tensor& src,
                                              const at::Tensor& dst) {
  const c10::DispatchKeySet below = keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, MathBit);
  if (on_torchplug_device(src) || on_torchplug_device(dst)) {
    return at::_ops::_copy_from_and_resize::redispatch(below, src, dst);
  }
  const at::Tensor resolved = MathBit == c10::DispatchKey::Conjugate ? at::resolve_conj(src) : at::resolve_neg(src);
  return at::_ops::_copy_from_and_resize::call(resolved, dst);
}

template <c10::DispatchKey MathBit>
torch::Library* math_bit_copies() {
  auto* library = new torch::Library(torch::Library::IMPL, "aten", MathBit, __FILE__, __LINE__);
  library->impl("_copy_from", TORCH_FN(copy_from_with_math_bit<MathBit>));
  library->impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_with_math_bit<MathBit>));
  return library;
}

}  // namespace

void register_math_bit_copies() {
  // Process-wide keys: registered once, kept for the life of the process.
  static const std::array<torch::Library*, 2> libraries{math_bit_copies<c10::DispatchKey::Conjugate>(),
                                                        math_bit_copies<c10::DispatchKey::Negative>()};
  (void)libraries;
}

void register_copy_kernels(DeviceKernels& library) {
  library.impl("_copy_from", TORCH_FN(copy_from));
  library.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  library.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace torchplug
