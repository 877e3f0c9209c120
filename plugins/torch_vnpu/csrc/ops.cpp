#include "ops.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>
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

// `tensor` itself when it is contiguous: torch::stable::contiguous is a
// boxed dispatcher call even then, which a 4-element kernel would pay twice over.
Tensor dense(const Tensor& tensor) {
  return tensor.is_contiguous() ? tensor : torch::stable::contiguous(tensor);
}

// A new contiguous tensor of `model`'s sizes, element type and device, from
// the stable C shim's allocation (torch::stable::empty_like goes through the
// boxed dispatcher).
Tensor empty_contiguous_like(const Tensor& model) {
  // One call for the sizes (model.size(d) is one per dimension).
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = model.sizes();
  const auto dims = static_cast<int64_t>(sizes.size());
  // The sizes, then the strides.
  std::vector<int64_t> layout(static_cast<size_t>(2 * dims));
  int64_t stride = 1;
  for (int64_t d = dims - 1; d >= 0; --d) {
    const int64_t size = sizes[static_cast<size_t>(d)];
    layout[static_cast<size_t>(d)] = size;
    layout[static_cast<size_t>(dims + d)] = stride;
    stride *= std::max<int64_t>(size, 1);
  }
  int32_t dtype = 0;
  int32_t device_type = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(model.get(), &dtype));
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(model.get(), &device_type));
  AtenTensorHandle allocated = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(dims, layout.data(), layout.data() + dims, dtype,
                                                         device_type, model.get_device_index(), &allocated));
  return Tensor(allocated);
}

// The elements of `tensor`, whose type T the caller checked (the typed
// accessors of torch::stable::Tensor check it again, a call into torch each).
template <typename T>
const T* elements(const Tensor& tensor) {
  return static_cast<const T*>(tensor.const_data_ptr());
}
template <typename T>
T* mutable_elements(const Tensor& tensor) {
  return static_cast<T*>(tensor.mutable_data_ptr());
}

// The rows and columns of a normalisation over the last dimension.
std::pair<int64_t, int64_t> rows_and_columns(const Tensor& x) {
  const int64_t columns = x.size(-1);
  return {columns == 0 ? 0 : x.numel() / columns, columns};
}

}  // namespace

Tensor fast_gelu(const Tensor& self) {
  check_floating("fast_gelu", "input", self);
  const Tensor x = dense(self);
  Tensor y = empty_contiguous_like(x);
  const torchplug::stable::KernelScope scope("npu::fast_gelu", x, {x, y});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    fast_gelu_loop(elements<T>(x), mutable_elements<T>(y), x.numel());
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
  const Tensor x = dense(self);
  const bool direct = out.is_contiguous();
  Tensor y = direct ? out : empty_contiguous_like(x);
  {
    const torchplug::stable::KernelScope scope("npu::fast_gelu.out", x, {x, y});
    with_floating_type(x, [&](auto element) {
      using T = decltype(element);
      fast_gelu_loop(elements<T>(x), mutable_elements<T>(y), x.numel());
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
  const Tensor x = dense(self);
  const Tensor g = dense(grad);
  Tensor grad_x = empty_contiguous_like(x);
  const torchplug::stable::KernelScope scope("npu::fast_gelu_backward", x, {g, x, grad_x});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    fast_gelu_backward_loop(elements<T>(g), elements<T>(x), mutable_elements<T>(grad_x), x.numel());
  });
  return grad_x;
}

Tensor rms_norm(const Tensor& self, const Tensor& weight, double eps) {
  check_rms_norm_arguments("rms_norm", self, weight, eps);
  const Tensor x = dense(self);
  const Tensor w = dense(weight);
  Tensor y = empty_contiguous_like(x);
  const auto [rows, columns] = rows_and_columns(x);
  const torchplug::stable::KernelScope scope("npu::rms_norm", x, {x, w, y});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    rms_norm_loop(elements<T>(x), elements<T>(w), mutable_elements<T>(y), rows, columns, eps);
  });
  return y;
}

std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& self, const Tensor& weight,
                                             double eps) {
  check_rms_norm_arguments("rms_norm_backward", self, weight, eps);
  check_grad("rms_norm_backward", grad, self);
  const Tensor x = dense(self);
  const Tensor w = dense(weight);
  const Tensor g = dense(grad);
  Tensor grad_x = empty_contiguous_like(x);
  Tensor grad_weight = empty_contiguous_like(w);
  const auto [rows, columns] = rows_and_columns(x);
  const torchplug::stable::KernelScope scope("npu::rms_norm_backward", x, {g, x, w, grad_x, grad_weight});
  with_floating_type(x, [&](auto element) {
    using T = decltype(element);
    rms_norm_backward_loop(elements<T>(g), elements<T>(x), elements<T>(w),
                           mutable_elements<T>(grad_x), mutable_elements<T>(grad_weight), rows, columns, eps);
  });
  return {grad_x, grad_weight};
}

}  // namespace torch_vnpu
