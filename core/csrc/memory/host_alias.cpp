#include "memory/host_alias.h"

#include <cstring>

#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>

#include <c10/core/TensorOptions.h>

#include "backend/backend.h"
#include "memory/device_allocator.h"
#include "driver/memory_access.h"

namespace torchplug {

c10::DispatchKeySet device_key_set(c10::DeviceType type) { return backend(type).dense_keys; }

namespace {

// The conjugate and negative bits are dispatch keys, not metadata of the
// TensorImpl: a tensor built from a bare key set must get them back, or a
// view of conj(x) would read as x.
void copy_math_bits(const at::Tensor& from, const at::Tensor& to) {
  c10::TensorImpl* impl = to.unsafeGetTensorImpl();
  impl->_set_conj(from.is_conj());
  impl->_set_neg(from.is_neg());
}

}  // namespace

namespace {

c10::Storage host_storage_of(const c10::Storage& storage) {
  return c10::Storage(c10::Storage::use_byte_size_t(), storage.nbytes(),
                      c10::DataPtr(storage.mutable_data(), c10::Device(c10::kCPU)), c10::GetCPUAllocator(),
                      /*resizable=*/true);
}

at::Tensor alias_over(c10::Storage host_storage, const at::Tensor& device_tensor) {
  auto alias = at::detail::make_tensor<c10::TensorImpl>(
      std::move(host_storage), c10::DispatchKeySet(c10::DispatchKey::CPU), device_tensor.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(device_tensor.sizes(), device_tensor.strides(),
                                                     device_tensor.storage_offset());
  copy_math_bits(device_tensor, alias);
  return alias;
}

}  // namespace

at::Tensor host_alias(const at::Tensor& device_tensor) {
  return alias_over(host_storage_of(device_tensor.storage()), device_tensor);
}

at::Tensor HostAliases::alias(const at::Tensor& device_tensor) {
  const c10::StorageImpl* device_storage = device_tensor.storage().unsafeGetStorageImpl();
  for (const auto& [known, host_storage] : storages_) {
    if (known == device_storage) {
      return alias_over(host_storage, device_tensor);
    }
  }
  c10::Storage host_storage = host_storage_of(device_tensor.storage());
  storages_.emplace_back(device_storage, host_storage);
  return alias_over(std::move(host_storage), device_tensor);
}

at::Tensor device_view(const c10::Storage& storage, const at::Tensor& like, c10::DispatchKeySet keys) {
  const c10::DispatchKeySet math_bits{c10::DispatchKey::Conjugate, c10::DispatchKey::Negative};
  auto view = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), keys - math_bits, like.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  copy_math_bits(like, view);
  return view;
}

namespace {

// Device memory holding a copy of `host_storage` (strict mode: device memory
// must be page-protected, which host allocations cannot be).
c10::DataPtr copied_to_device(const c10::Storage& host_storage, c10::Device device) {
  c10::DeviceGuard guard(device);
  c10::DataPtr data = device_allocator(device.type()).allocate(host_storage.nbytes());
  if (host_storage.nbytes() > 0) {  // an empty storage's pointers may be null
    const driver::MemoryAccess access{data.get()};
    std::memcpy(data.get(), host_storage.data(), host_storage.nbytes());
  }
  return data;
}

// `sole_owner`: nothing but the kernel's result holds the host memory, so it
// can move to the device; otherwise (a caller's tensor, a storage other
// tensors view) it is copied, and the host tensor keeps its memory.
c10::DataPtr take_as_device_memory(const c10::Storage& host_storage, c10::Device device, bool sole_owner) {
  c10::StorageImpl* impl = host_storage.unsafeGetStorageImpl();
  const size_t nbytes = impl->nbytes();
  if (driver::strict_memory() || nbytes == 0 || !sole_owner || host_storage.use_count() > 1 ||
      !impl->data_ptr().get()) {
    return copied_to_device(host_storage, device);
  }
  c10::DataPtr host_data = impl->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
  return adopt_as_device_memory(std::move(host_data), nbytes, device);
}

}  // namespace

at::Tensor adopt_host_tensor(const at::Tensor& host_tensor, c10::Device device) {
  const c10::Storage& host_storage = host_tensor.storage();
  const size_t nbytes = host_storage.nbytes();
  const bool sole_owner = host_tensor.use_count() == 1;
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, take_as_device_memory(host_storage, device, sole_owner),
                       &device_allocator(device.type()), /*resizable=*/true);
  return device_view(storage, host_tensor, device_key_set(device.type()));
}

void adopt_host_storage(const c10::Storage& host_storage, const c10::Storage& device_storage) {
  const c10::Device device = device_storage.device();
  c10::StorageImpl* impl = device_storage.unsafeGetStorageImpl();
  const size_t nbytes = host_storage.nbytes();
  impl->set_data_ptr_noswap(take_as_device_memory(host_storage, device, /*sole_owner=*/true));
  impl->set_nbytes(nbytes);
}

}  // namespace torchplug
