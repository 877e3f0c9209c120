#include "ops.h"

#include <ATen/Dispatch.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_like.h>
#include <torchplug/kernel_scope.h>

#include "fused_loops.h"

namespace torch_vnpu {
namespace {

void check_floating(const char* op, const char* name, const at::Tensor& tensor) {
  TORCH_CHECK(at::isFloatingType(tensor.scalar_type()), "npu::", op, ": ", name,
              " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ",
              tensor.scalar_type(), "; convert it with .float().");
}

void check_same(const char* op, const at::Tensor& first, const char* first_name, const at::Tensor& other,
                const char* other_name) {
  TORCH_CHECK(first.device() == other.device(), "npu::", op, ": expected ", other_name, " on ",
              first.device(), " like ", first_name, ", but it is on ", other.device(), "; move it with .to(",
              first_name, ".device).");
  TORCH_CHECK(first.scalar_type() == other.scalar_type(), "npu::", op, ": ", other_name, " has dtype ",
              other.scalar_type(), " but ", first_name, " has ", first.scalar_type(), "; cast one of them.");
}

// A backward's incoming gradient: the input's device, dtype and shape.
void check_grad(const char* op, const at::Tensor& grad, const at::Tensor& self) {
  check_same(op, self, "input", grad, "grad");
  TORCH_CHECK(grad.sizes() == self.sizes(), "npu::", op, ": grad has shape ", grad.sizes(), " but the input has ",
              self.sizes(), ".");
}

void check_rms_norm_arguments(const char* op, const at::Tensor& self, const at::Tensor& weight, double eps) {
  check_floating(op, "input", self);
  check_same(op, self, "input", weight, "weight");
  TORCH_CHECK(self.dim() >= 1, "npu::", op, ": input must have at least one dimension.");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == self.size(-1), "npu::", op,
              ": weight must be 1-D with as many elements as the input's last dimension (",
              self.size(-1), "), got shape ", weight.sizes(), ".");
  TORCH_CHECK(eps >= 0, "npu::", op, ": eps must be non-negative, got ", eps, ".");
}

}  // namespace

at::Tensor fast_gelu(const at::Tensor& self) {
  check_floating("fast_gelu", "input", self);
  const at::Tensor x = self.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const torchplug::KernelScope scope("npu::fast_gelu", x.device(), {x, y});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "npu::fast_gelu", [&] {
    fast_gelu_loop(x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), x.numel());
  });
  return y;
}

at::Tensor& fast_gelu_out(const at::Tensor& self, at::Tensor& out) {
  check_floating("fast_gelu.out", "input", self);
  check_same("fast_gelu.out", self, "input", out, "out");
  at::native::resize_output(out, self.sizes());
  torchplug::check_no_overlap(/*inputs=*/{self}, /*outputs=*/{out});
  // A strided out= tensor takes the result through a contiguous buffer, as
  // CUDA's out= kernels do.
  const at::Tensor x = self.contiguous();
  at::Tensor y = out.is_contiguous() ? out : at::empty_like(x, at::MemoryFormat::Contiguous);
  {
    const torchplug::KernelScope scope("npu::fast_gelu.out", x.device(), {x, y});
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "npu::fast_gelu.out", [&] {
      fast_gelu_loop(x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), x.numel());
    });
  }
  if (!y.is_same(out)) {
    out.copy_(y);
  }
  return out;
}

at::Tensor fast_gelu_backward(const at::Tensor& grad, const at::Tensor& self) {
  check_floating("fast_gelu_backward", "input", self);
  check_grad("fast_gelu_backward", grad, self);
  const at::Tensor x = self.contiguous();
  const at::Tensor g = grad.contiguous();
  at::Tensor grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
  const torchplug::KernelScope scope("npu::fast_gelu_backward", x.device(), {g, x, grad_x});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "npu::fast_gelu_backward", [&] {
    fast_gelu_backward_loop(g.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                            grad_x.mutable_data_ptr<scalar_t>(), x.numel());
  });
  return grad_x;
}

at::Tensor rms_norm(const at::Tensor& self, const at::Tensor& weight, double eps) {
  check_rms_norm_arguments("rms_norm", self, weight, eps);
  const at::Tensor x = self.contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const torchplug::KernelScope scope("npu::rms_norm", x.device(), {x, w, y});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "npu::rms_norm", [&] {
    rms_norm_loop(x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
                  rows, cols, eps);
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& self,
                                                     const at::Tensor& weight, double eps) {
  check_rms_norm_arguments("rms_norm_backward", self, weight, eps);
  check_grad("rms_norm_backward", grad, self);
  const at::Tensor x = self.contiguous();
  const at::Tensor w = weight.contiguous();
  const at::Tensor g = grad.contiguous();
  at::Tensor grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
  at::Tensor grad_weight = at::empty_like(w, at::MemoryFormat::Contiguous);
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const torchplug::KernelScope scope("npu::rms_norm_backward", x.device(), {g, x, w, grad_x, grad_weight});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "npu::rms_norm_backward", [&] {
    rms_norm_backward_loop(g.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                           w.const_data_ptr<scalar_t>(), grad_x.mutable_data_ptr<scalar_t>(),
                           grad_weight.mutable_data_ptr<scalar_t>(), rows, cols, eps);
  });
  return {grad_x, grad_weight};
}

}  // namespace torch_vnpu
