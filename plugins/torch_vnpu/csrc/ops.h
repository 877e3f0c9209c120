#pragma once
// The npu::* operators at the tensor level: argument checks, layout and
// allocation around the fused loops. The same functions serve the CPU and the
// PrivateUse1 (npu) dispatch keys.
#include <tuple>

#include <ATen/core/Tensor.h>

namespace torch_vnpu {

at::Tensor fast_gelu(const at::Tensor& self);
// Writes into `out` (resized like `self`), which may be `self` itself.
at::Tensor& fast_gelu_out(const at::Tensor& self, at::Tensor& out);
at::Tensor fast_gelu_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor rms_norm(const at::Tensor& self, const at::Tensor& weight, double eps);
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& self,
                                                     const at::Tensor& weight, double eps);

}  // namespace torch_vnpu
