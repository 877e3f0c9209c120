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

// What the checks and the launch read of an operand, each read once: every
// accessor of torch::stable::Tensor is a call into torch, which a kernel over
// a few elements notices.
struct Facts {
  int32_t dtype;  // the C shim's code for `type`
  ScalarType type;
  torch::stable::Device device;
};

// The element type the C shim's dtype `code` names. Tensor::scalar_type()
// asks torch for the code of each type in turn until one matches (seven
// calls for float32); the floating types' codes are asked once here.
ScalarType element_type(int32_t code) {
  static const int32_t float32 = aoti_torch_dtype_float32();
  static const int32_t float64 = aoti_torch_dtype_float64();
  static const int32_t float16 = aoti_torch_dtype_float16();
  static const int32_t bfloat16 = aoti_torch_dtype_bfloat16();
  if (code == float32) {
    return ScalarType::Float;
  }
  if (code == float64) {
    return ScalarType::Double;
  }
  if (code == float16) {
    return ScalarType::Half;
  }
  if (code == bfloat16) {
    return ScalarType::BFloat16;
  }
  return torch::stable::detail::to<ScalarType>(torch::stable::detail::from(code));
}

Facts facts_of(const Tensor& tensor) {
  int32_t dtype = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(tensor.get(), &dtype));
  return {dtype, element_type(dtype), tensor.device()};
}

bool floating(ScalarType type) {
  return type == ScalarType::Float || type == ScalarType::Double || type == ScalarType::Half ||
         type == ScalarType::BFloat16;
}

// Calls `body(T{})` for the floating element type T of `type` (checked floating before).
template <typename Body>
void with_floating_type(ScalarType type, Body&& body) {
  switch (type) {
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

// The facts of the input `name` (a floating-point tensor).
Facts check_floating(const char* op, const char* name, const Tensor& tensor) {
  const Facts facts = facts_of(tensor);
  STD_TORCH_CHECK(floating(facts.type), "npu::", op, ": ", name,
                  " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ",
                  torch::headeronly::toString(facts.type), "; convert it with .float().");
  return facts;
}

// `other` has the device and dtype of `first`, whose facts are `expected`.
void check_same(const char* op, const Tensor& first, const Facts& expected, const char* first_name,
                const Tensor& other, const char* other_name) {
  const Facts facts = facts_of(other);
  STD_TORCH_CHECK(facts.device == expected.device, "npu::", op, ": expected ", other_name, " on ",
                  torchplug::stable::device_name(first), " like ", first_name, ", but it is on ",
                  torchplug::stable::device_name(other), "; move it with .to(", first_name, ".device).");
  STD_TORCH_CHECK(facts.type == expected.type, "npu::", op, ": ", other_name, " has dtype ",
                  torch::headeronly::toString(facts.type), " but ", first_name, " has ",
                  torch::headeronly::toString(expected.type), "; cast one of them.");
}

// A backward's incoming gradient: the input's device, dtype and shape.
void check_grad(const char* op, const Tensor& grad, const Tensor& self, const Facts& facts) {
  check_same(op, self, facts, "input", grad, "grad");
  STD_TORCH_CHECK(same_shape(grad, self), "npu::", op, ": grad has shape ", shape_of(grad),
                  " but the input has ", shape_of(self), ".");
}

// The input's facts.
Facts check_rms_norm_arguments(const char* op, const Tensor& self, const Tensor& weight, double eps) {
  const Facts facts = check_floating(op, "input", self);
  check_same(op, self, facts, "input", weight, "weight");
  STD_TORCH_CHECK(self.dim() >= 1, "npu::", op, ": input must have at least one dimension.");
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == self.size(-1), "npu::", op,
                  ": weight must be 1-D with as many elements as the input's last dimension (", self.size(-1),
                  "), got shape ", shape_of(weight), ".");
  STD_TORCH_CHECK(eps >= 0, "npu::", op, ": eps must be non-negative, got ", eps, ".");
  return facts;
}

// `tensor` itself when it is contiguous: torch::stable::contiguous is a
// boxed dispatcher call even then, which a 4-element kernel would pay twice over.
Tensor dense(const Tensor& tensor) {
  return tensor.is_contiguous() ? tensor : torch::stable::contiguous(tensor);
}

// A new contiguous tensor of `model`'s sizes, element type and device (its
// `facts`), from the stable C shim's allocation (torch::stable::empty_like
// goes through the boxed dispatcher).
Tensor empty_contiguous_like(const Tensor& model, const Facts& facts) {
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
  AtenTensorHandle allocated = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(
      dims, layout.data(), layout.data() + dims, facts.dtype,
      static_cast<int32_t>(facts.device.type()), facts.device.index(), &allocated));
  return Tensor(allocated);
}

// The rows and columns of a normalisation over the last dimension.
std::pair<int64_t, int64_t> rows_and_columns(const Tensor& x) {
  const int64_t columns = x.size(-1);
  return {columns == 0 ? 0 : x.numel() / columns, columns};
}

// y = fast_gelu(x) for contiguous x and y of x's facts, as the kernel `name`.
void run_fast_gelu(const char* name, const Facts& facts, const Tensor& x, const Tensor& y) {
  const void* in = x.const_data_ptr();
  void* out = y.mutable_data_ptr();
  const torchplug::stable::KernelScope scope(name, facts.device, {in, out});
  with_floating_type(facts.type, [&](auto element) {
    using T = decltype(element);
    fast_gelu_loop(static_cast<const T*>(in), static_cast<T*>(out), x.numel());
  });
}

}  // namespace

Tensor fast_gelu(const Tensor& self) {
  const Facts facts = check_floating("fast_gelu", "input", self);
  const Tensor x = dense(self);
  Tensor y = empty_contiguous_like(x, facts);
  run_fast_gelu("npu::fast_gelu", facts, x, y);
  return y;
}

Tensor fast_gelu_out(const Tensor& self, Tensor out) {
  const Facts facts = check_floating("fast_gelu.out", "input", self);
  check_same("fast_gelu.out", self, facts, "input", out, "out");
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
  Tensor y = direct ? out : empty_contiguous_like(x, facts);
  run_fast_gelu("npu::fast_gelu.out", facts, x, y);
  if (!direct) {
    torch::stable::copy_(out, y);
  }
  return out;
}

Tensor fast_gelu_backward(const Tensor& grad, const Tensor& self) {
  const Facts facts = check_floating("fast_gelu_backward", "input", self);
  check_grad("fast_gelu_backward", grad, self, facts);
  const Tensor x = dense(self);
  const Tensor g = dense(grad);
  Tensor grad_x = empty_contiguous_like(x, facts);
  const void* in = x.const_data_ptr();
  const void* incoming = g.const_data_ptr();
  void* out = grad_x.mutable_data_ptr();
  const torchplug::stable::KernelScope scope("npu::fast_gelu_backward", facts.device, {incoming, in, out});
  with_floating_type(facts.type, [&](auto element) {
    using T = decltype(element);
    fast_gelu_backward_loop(static_cast<const T*>(incoming), static_cast<const T*>(in), static_cast<T*>(out),
                            x.numel());
  });
  return grad_x;
}

Tensor rms_norm(const Tensor& self, const Tensor& weight, double eps) {
  const Facts facts = check_rms_norm_arguments("rms_norm", self, weight, eps);
  const Tensor x = dense(self);
  const Tensor w = dense(weight);
  Tensor y = empty_contiguous_like(x, facts);
  const auto [rows, columns] = rows_and_columns(x);
  const void* in = x.const_data_ptr();
  const void* scale = w.const_data_ptr();
  void* out = y.mutable_data_ptr();
  const torchplug::stable::KernelScope scope("npu::rms_norm", facts.device, {in, scale, out});
  with_floating_type(facts.type, [&](auto element) {
    using T = decltype(element);
    rms_norm_loop(static_cast<const T*>(in), static_cast<const T*>(scale), static_cast<T*>(out), rows, columns,
                  eps);
  });
  return y;
}

std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& self, const Tensor& weight,
                                             double eps) {
  const Facts facts = check_rms_norm_arguments("rms_norm_backward", self, weight, eps);
  check_grad("rms_norm_backward", grad, self, facts);
  const Tensor x = dense(self);
  const Tensor w = dense(weight);
  const Tensor g = dense(grad);
  Tensor grad_x = empty_contiguous_like(x, facts);
  Tensor grad_weight = empty_contiguous_like(w, facts);
  const auto [rows, columns] = rows_and_columns(x);
  const void* incoming = g.const_data_ptr();
  const void* in = x.const_data_ptr();
  const void* scale = w.const_data_ptr();
  void* out = grad_x.mutable_data_ptr();
  void* scale_out = grad_weight.mutable_data_ptr();
  const torchplug::stable::KernelScope scope("npu::rms_norm_backward", facts.device,
                                             {incoming, in, scale, out, scale_out});
  with_floating_type(facts.type, [&](auto element) {
    using T = decltype(element);
    rms_norm_backward_loop(static_cast<const T*>(incoming), static_cast<const T*>(in), static_cast<const T*>(scale),
                           static_cast<T*>(out), static_cast<T*>(scale_out), rows, columns, eps);
  });
  return {grad_x, grad_weight};
}

}  // namespace torch_vnpu
