#pragma once
// The npu::* operators at the tensor level: argument checks, layout and
// allocation around the fused loops. The same functions serve the CPU and the
// PrivateUse1 (npu) dispatch keys. Written against torch's stable ABI
// (torch::stable::Tensor), so one build loads into every torch the core
// supports.
#include <tuple>

#include <torch/csrc/stable/tensor.h>

namespace torch_vnpu {

using torch::stable::Tensor;

Tensor fast_gelu(const Tensor& self);
// Writes into `out` (resized like `self`), which may be `self` itself.
Tensor fast_gelu_out(const Tensor& self, Tensor out);
Tensor fast_gelu_backward(const Tensor& grad, const Tensor& self);
Tensor rms_norm(const Tensor& self, const Tensor& weight, double eps);
std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& self, const Tensor& weight,
                                             double eps);

}  // namespace torch_vnpu
