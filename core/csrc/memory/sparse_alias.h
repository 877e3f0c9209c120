#pragma once
// Sparse device tensors are a sparse shell around dense device tensors
// (indices, values). The CPU fallback hands them to CPU kernels as sparse CPU
// tensors around host aliases of those parts, and turns sparse CPU results
// back into device tensors, so sparse operators need no kernels of their own.
#include <functional>

#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace torchplug {

using ConvertPart = std::function<at::Tensor(const at::Tensor&)>;

bool is_sparse_layout(const at::Tensor& tensor);

// A sparse CPU tensor whose parts are `to_host(part)` of `device_tensor`'s.
at::Tensor sparse_host_alias(const at::Tensor& device_tensor, const ConvertPart& to_host);

// A sparse tensor on `device` whose parts are `to_device(part)` of `host_tensor`'s.
at::Tensor sparse_to_device(const at::Tensor& host_tensor, c10::Device device, const ConvertPart& to_device);

// After a kernel mutated `host_alias` (e.g. copy_, add_ into a sparse
// tensor), gives `device_tensor` its new shape and parts.
void sync_sparse(const at::Tensor& host_alias, const at::Tensor& device_tensor, const ConvertPart& to_device);

// Device kernels that define what a sparse device tensor is (construction and
// access to its parts); every other sparse operator takes the CPU fallback.
void register_sparse_kernels(torch::Library& coo, torch::Library& compressed);

}  // namespace torchplug
