#include "ops.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>
#include <torchplug/stable/kernel_scope.h>

#include "fused_loops.h"

namespace torch_vnpu {
namespace {

using torch::headeronly::ScalarType;

bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) {
    return false;
  }
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) != b.size(d)) {
      return false;
    }
  }
  return true;
}

std::string shape_of(const Tensor& tensor) {
  std::ostringstream text;
  text << "[";
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    text << (d > 0 ? ", " : "") << tensor.size(d);
  }
  text << "]";
  return text.str();
}

bool floating(ScalarType type) {
  return type == ScalarType::Float || type == ScalarType::Double || type == ScalarType::Half ||
         type == ScalarType::BFloat16;
}

// Calls `body(T{})` for the floating element type T of `tensor` (checked floating before).
template <typename Body>
void with_floating_type(const Tensor& tensor, Body&& body) {
  switch (tensor.scalar_type()) {
    case ScalarType::Double:
      return body(double{});
    case ScalarType::Half:
      return body(torch::headeronly::Half{});
    case ScalarType::BFloat16:
      return body(torch::headeronly::BFloat16{});
    default:
      return body(float{});
  }
}

void check_floating(const char* op, const char* name, const Tensor& tensor) {
  STD_TORCH_CHECK(floating(tensor.scalar_type()), "npu::", op, ": ", name,
                  " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ",
                  torch::headeronly::toString(tensor.scalar_type()), "; convert it with .float().");
}

void check_same(const char* op, const Tensor& first, const char* first_name, const Tensor& other,
                const char* other_name) {
  const torch::stable::Device device = first.device();
  const torch::stable::Device other_device = other.device();
  STD_TORCH_CHECK(device == other_device, "npu::", op, ": expected ", other_name, " on ",
                  torchplug::stable::device_name(first), " like ", first_name, ", but it is on ",
                  torchplug::stable::device_name(other), "; move it with .to(", first_name, ".device).");
  STD_TORCH_CHECK(first.scalar_type() == other.scalar_type(), "npu::", op, ": ", other_name, " has dtype ",
                  torch::headeronly::toString(other.scalar_type()), " but ", first_name, " has ",
                  torch::headeronly::toString(first.scalar_type()), "; cast one of them.");
}

// A backward's incoming gradient: the input's device, dtype and shape.
void check_grad(const char* op, const Tensor& grad, const Tensor& self) {
  check_same(op, self, "input", grad, "grad");
  STD_TORCH_CHECK(same_shape(grad, self), "npu::", op, ": grad has shape ", shape_of(grad),
                  " but the input has ", shape_of(self), ".");
}

void check_rms_norm_arguments(const char* op, const Tensor& self, const Tensor& weight, double eps) {
  check_floating(op, "input", self);
  check_same(op, self, "input", weight, "weight");
  STD_TORCH_CHECK(self.dim() >= 1, "npu::", op, ": input must have at least one dimension.");
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == self.size(-1), "npu::", op,
                  ": weight must be 1-D with as many elements as the input's last dimension (", self.size(-1),
                  "), got shape ", shape_of(weight), ".");
  STD_TORCH_CHECK(eps >= 0, "npu::", op, ": eps must be non-negative, got ", eps, ".");
}

// The rows and columns of a normalisation over the last dimension.
std::pair<int64_t, int64_t> rows_and_columns(const Tensor& x) {
  const int64_t columns = x.size(-1);
  return {columns == 0 ? 0 : x.numel() / columns, columns};
}

}  // namespace

Tensor fast_gelu(const Tensor& self) {
  check_floating("fast_gelu", "input", self);
  const Tensor x = torch::stable::contiguous(self);
  Tensor y = torch::stable::empty_like(x);
  const torchplug::stable::KernelScope scope("npu::fast_gelu", x, {x, y});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    fast_gelu_loop(x.const_data_ptr<T>(), y.mutable_data_ptr<T>(), x.numel());
  });
  return y;
}

Tensor fast_gelu_out(const Tensor& self, Tensor out) {
  check_floating("fast_gelu.out", "input", self);
  check_same("fast_gelu.out", self, "input", out, "out");
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < self.dim(); ++d) {
    sizes.push_back(self.size(d));
  }
  torchplug::stable::resize_output(out, sizes);
  torchplug::stable::check_no_overlap(/*inputs=*/{self}, /*outputs=*/{out});
  // A strided out= tensor takes the result through a contiguous buffer, as
  // CUDA's out= kernels do.
  const Tensor x = torch::stable::contiguous(self);
  const bool direct = out.is_contiguous();
  Tensor y = direct ? out : torch::stable::empty_like(x);
  {
    const torchplug::stable::KernelScope scope("npu::fast_gelu.out", x, {x, y});
    with_floating_type(x, [&](auto element) {
      using T = decltype(element);
      fast_gelu_loop(x.const_data_ptr<T>(), y.mutable_data_ptr<T>(), x.numel());
    });
  }
  if (!direct) {
    torch::stable::copy_(out, y);
  }
  return out;
}

Tensor fast_gelu_backward(const Tensor& grad, const Tensor& self) {
  check_floating("fast_gelu_backward", "input", self);
  check_grad("fast_gelu_backward", grad, self);
  const Tensor x = torch::stable::contiguous(self);
  const Tensor g = torch::stable::contiguous(grad);
  Tensor grad_x = torch::stable::empty_like(x);
  const torchplug::stable::KernelScope scope("npu::fast_gelu_backward", x, {g, x, grad_x});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    fast_gelu_backward_loop(g.const_data_ptr<T>(), x.const_data_ptr<T>(), grad_x.mutable_data_ptr<T>(), x.numel());
  });
  return grad_x;
}

Tensor rms_norm(const Tensor& self, const Tensor& weight, double eps) {
  check_rms_norm_arguments("rms_norm", self, weight, eps);
  const Tensor x = torch::stable::contiguous(self);
  const Tensor w = torch::stable::contiguous(weight);
  Tensor y = torch::stable::empty_like(x);
  const auto [rows, columns] = rows_and_columns(x);
  const torchplug::stable::KernelScope scope("npu::rms_norm", x, {x, w, y});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    rms_norm_loop(x.const_data_ptr<T>(), w.const_data_ptr<T>(), y.mutable_data_ptr<T>(), rows, columns, eps);
  });
  return y;
}

std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& self, const Tensor& weight,
                                             double eps) {
  check_rms_norm_arguments("rms_norm_backward", self, weight, eps);
  check_grad("rms_norm_backward", grad, self);
  const Tensor x = torch::stable::contiguous(self);
  const Tensor w = torch::stable::contiguous(weight);
  const Tensor g = torch::stable::contiguous(grad);
  Tensor grad_x = torch::stable::empty_like(x);
  Tensor grad_weight = torch::stable::empty_like(w);
  const auto [rows, columns] = rows_and_columns(x);
  const torchplug::stable::KernelScope scope("npu::rms_norm_backward", x, {g, x, w, grad_x, grad_weight});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    rms_norm_backward_loop(g.const_data_ptr<T>(), x.const_data_ptr<T>(), w.const_data_ptr<T>(),
                           grad_x.mutable_data_ptr<T>(), grad_weight.mutable_data_ptr<T>(), rows, columns, eps);
  });
  return {grad_x, grad_weight};
}

}  // namespace torch_vnpu
