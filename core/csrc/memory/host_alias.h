#pragma once
// Device memory in this project is host memory, so a device tensor can be
// handed to a CPU kernel as a CPU tensor over the same bytes (an alias), and
// a CPU kernel's fresh output can become device memory without a copy.
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

namespace torchplug {

// A CPU tensor viewing the same memory as `device_tensor`. Its storage does
// not own the memory: `device_tensor` must outlive it. It is resizable, so a
// kernel may reallocate it (out= arguments of the wrong size).
at::Tensor host_alias(const at::Tensor& device_tensor);

// The host aliases of one kernel call's device tensors. Aliases of tensors
// that share a device storage share one host storage, so the CPU kernel sees
// the overlap between them as it would between CPU tensors: ATen's memory
// overlap checks (at::assert_no_internal_overlap, assert_no_partial_overlap,
// TensorIterator's) compare storages, and would pass two views of one device
// allocation handed over as two storages.
class HostAliases {
 public:
  at::Tensor alias(const at::Tensor& device_tensor);

 private:
  c10::SmallVector<std::pair<const c10::StorageImpl*, c10::Storage>, 4> storages_;
};

// A device tensor with the sizes, strides and offset of `like`, over `storage`.
at::Tensor device_view(const c10::Storage& storage, const at::Tensor& like, c10::DispatchKeySet keys);

// Turns a CPU kernel's fresh output into a device tensor on `device`: its
// memory moves to the device when nothing else holds the tensor or its
// storage, and is copied otherwise (a caller's tensor keeps its memory).
at::Tensor adopt_host_tensor(const at::Tensor& host_tensor, c10::Device device);

// Gives `device_storage` the memory of `host_storage` (after a kernel
// reallocated an alias of it).
void adopt_host_storage(const c10::Storage& host_storage, const c10::Storage& device_storage);

c10::DispatchKeySet device_key_set(c10::DeviceType type);

}  // namespace torchplug
