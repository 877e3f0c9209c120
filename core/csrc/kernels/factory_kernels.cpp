// Tensor creation, views and storage manipulation: the kernels every backend
// must provide natively because they define what a device tensor is.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "backend/backend.h"
#include "memory/device_allocator.h"
#include "memory/host_alias.h"
#include "launch/kernel_launch.h"
#include "registration/kernels.h"

namespace torchplug {
namespace {

c10::Device target_device(std::optional<c10::Device> device) {
  TORCH_CHECK(device.has_value(), "A device is required to allocate a device tensor.");
  return c10::Device(device->type(), checked_device_index(device->type(), device->index()));
}

// The zero tensor autograd hands out for gradients known to be zero (e.g.
// sgn's): no memory, and the ZeroTensor key whose kernels never read it, as
// the CPU's and CUDA's. Through the CPU fallback it would lose the key and
// keep the null data pointer.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> device,
                                 std::optional<bool> /*pin_memory*/) {
  const c10::Device dev = target_device(device);
  ensure_kernels_registered(dev.type());  // a tensor without memory: the allocator is not asked
  const caffe2::TypeMeta type = c10::scalarTypeToTypeMeta(c10::dtype_or_default(dtype));
  c10::Storage nothing(c10::Storage::use_byte_size_t(),
                       at::detail::computeStorageNbytesContiguous(size, type.itemsize()), c10::DataPtr(nullptr, dev),
                       /*allocator=*/nullptr, /*resizable=*/false);
  auto zeros = at::detail::make_tensor<c10::TensorImpl>(
      std::move(nothing), device_key_set(dev.type()) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor), type);
  zeros.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  return zeros;
}

void check_layout(std::optional<c10::Layout> layout) {
  TORCH_CHECK(!layout.has_value() || *layout == c10::kStrided,
              "Simulated devices support strided tensors only, got layout ", *layout, ".");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> /*pin_memory*/,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_layout(layout);
  const c10::Device dev = target_device(device);
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, &device_allocator(dev.type()), device_key_set(dev.type()),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> /*pin_memory*/) {
  check_layout(layout);
  const c10::Device dev = target_device(device);
  c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(size, stride, &device_allocator(dev.type()),
                                           device_key_set(dev.type()), c10::dtype_or_default(dtype));
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format Preserve for resize_.");
    impl->empty_tensor_restride(*memory_format);
  }
  if (impl->numel() > 0) {
    const size_t needed = at::detail::computeStorageNbytes(size, impl->strides(), self.dtype().itemsize(),
                                                           impl->storage_offset());
    if (needed > self.storage().nbytes()) {
      resize_storage_bytes(self.storage(), needed);
    }
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  TORCH_CHECK(source.device() == self.device() || source.nbytes() == 0, "Cannot set a tensor on ",
              self.device(), " to storage on ", source.device(), ".");
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storage_offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const auto numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) {
    return self;
  }
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(self.device().type()).allocate(0),
                     &device_allocator(self.device().type()), /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  // The allocator waits for work on the stream before reusing the memory: a
  // stream of another device (or backend) has none of this memory's work.
  TORCH_CHECK(stream.device() == self.device(), "record_stream: the tensor is on ", self.device(),
              " but the stream is on ", stream.device(),
              "; a tensor can only be recorded on a stream of its own device, e.g. torch.",
              c10::DeviceTypeName(self.device().type(), /*lower_case=*/true), ".current_stream(tensor.device).");
  device_allocator(self.device().type()).recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

void register_factory_kernels(torch::Library& library) {
  library.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  library.impl("empty_strided", TORCH_FN(empty_strided));
  library.impl("_efficientzerotensor", TORCH_FN(efficient_zero_tensor));
  library.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  library.impl("view", TORCH_FN(at::native::view));
  library.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  library.impl("resize_", TORCH_FN(resize_));
  library.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  library.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  library.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  library.impl("set_", TORCH_FN(set_empty));
  library.impl("record_stream", TORCH_FN(record_stream));
}

}  // namespace torchplug
