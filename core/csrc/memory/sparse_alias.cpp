#include "memory/sparse_alias.h"

#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_compressed_tensor_unsafe.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>

namespace torchplug {
namespace {

at::SparseTensorImpl* coo_impl(const at::Tensor& tensor) {
  return static_cast<at::SparseTensorImpl*>(tensor.unsafeGetTensorImpl());
}

at::SparseCsrTensorImpl* compressed_impl(const at::Tensor& tensor) {
  return static_cast<at::SparseCsrTensorImpl*>(tensor.unsafeGetTensorImpl());
}

at::Tensor coo_like(const at::Tensor& like, const at::Tensor& indices, const at::Tensor& values,
                    c10::Device device) {
  const at::SparseTensorImpl* impl = coo_impl(like);
  return at::_sparse_coo_tensor_with_dims_and_tensors(impl->sparse_dim(), impl->dense_dim(), like.sizes(), indices,
                                                      values, like.options().device(device), impl->coalesced());
}

at::Tensor compressed_like(const at::Tensor& like, const at::Tensor& compressed, const at::Tensor& plain,
                           const at::Tensor& values, c10::Device device) {
  return at::_sparse_compressed_tensor_unsafe(compressed, plain, values, like.sizes(),
                                              like.options().device(device));
}

}  // namespace

bool is_sparse_layout(const at::Tensor& tensor) {
  switch (tensor.layout()) {
    case c10::kSparse:
    case c10::kSparseCsr:
    case c10::kSparseCsc:
    case c10::kSparseBsr:
    case c10::kSparseBsc:
      return true;
    default:
      return false;  // strided, and the CPU's opaque oneDNN layout, which is no sparse tensor
  }
}

at::Tensor sparse_host_alias(const at::Tensor& device_tensor, const ConvertPart& to_host) {
  if (device_tensor.layout() == c10::kSparse) {
    const at::SparseTensorImpl* impl = coo_impl(device_tensor);
    return coo_like(device_tensor, to_host(impl->indices()), to_host(impl->values()), c10::Device(c10::kCPU));
  }
  const at::SparseCsrTensorImpl* impl = compressed_impl(device_tensor);
  return compressed_like(device_tensor, to_host(impl->compressed_indices()), to_host(impl->plain_indices()),
                         to_host(impl->values()), c10::Device(c10::kCPU));
}

at::Tensor sparse_to_device(const at::Tensor& host_tensor, c10::Device device, const ConvertPart& to_device) {
  if (host_tensor.layout() == c10::kSparse) {
    const at::SparseTensorImpl* impl = coo_impl(host_tensor);
    return coo_like(host_tensor, to_device(impl->indices()), to_device(impl->values()), device);
  }
  const at::SparseCsrTensorImpl* impl = compressed_impl(host_tensor);
  return compressed_like(host_tensor, to_device(impl->compressed_indices()), to_device(impl->plain_indices()),
                         to_device(impl->values()), device);
}

void sync_sparse(const at::Tensor& host_alias, const at::Tensor& device_tensor, const ConvertPart& to_device) {
  if (host_alias.layout() == c10::kSparse) {
    const at::SparseTensorImpl* host = coo_impl(host_alias);
    at::SparseTensorImpl* device = coo_impl(device_tensor);
    device->raw_resize_(host->sparse_dim(), host->dense_dim(), host_alias.sizes());
    device->set_indices_and_values_unsafe(to_device(host->indices()), to_device(host->values()));
    device->set_coalesced(host->coalesced());
    return;
  }
  const at::SparseCsrTensorImpl* host = compressed_impl(host_alias);
  compressed_impl(device_tensor)
      ->set_member_tensors(to_device(host->compressed_indices()), to_device(host->plain_indices()),
                           to_device(host->values()), host_alias.sizes());
}

void register_sparse_kernels(torch::Library& coo, torch::Library& compressed) {
  coo.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
  coo.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  coo.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  coo.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  coo.impl("_values", TORCH_FN(at::native::_values_sparse));
  coo.impl("indices", TORCH_FN(at::native::indices_sparse));
  coo.impl("values", TORCH_FN(at::native::values_sparse));
  coo.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  coo.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  coo.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  coo.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  coo.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  coo.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  coo.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));

  compressed.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed));
  compressed.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  compressed.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  compressed.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  compressed.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  compressed.impl("values", TORCH_FN(at::native::values_sparse_csr));
  compressed.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  compressed.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  compressed.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
}

}  // namespace torchplug
