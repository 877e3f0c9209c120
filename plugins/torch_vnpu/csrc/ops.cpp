#include "ops.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
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

// What the checks, the allocation and the launch read of an operand, each
// read once.
struct Facts {
  int32_t dtype;  // the C shim's code for `type`
  ScalarType type;
  int32_t device_type;  // the C shim's code for `device`'s type
  torch::stable::Device device;
};

Facts facts_of(const TensorHandle& tensor) {
  const int32_t dtype = tensor.dtype();
  const int32_t device_type = tensor.device_type();
  return {dtype, element_type(dtype), device_type,
          torch::stable::Device(device_type_of(device_type), tensor.device_index())};
}

std::string shape_of(const TensorHandle& tensor) {
  std::ostringstream text;
  text << "[";
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = tensor.sizes();
  for (size_t d = 0; d < sizes.size(); ++d) {
    text << (d > 0 ? ", " : "") << sizes[d];
  }
  text << "]";
  return text.str();
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
Facts check_floating(const char* op, const char* name, const TensorHandle& tensor) {
  const Facts facts = facts_of(tensor);
  STD_TORCH_CHECK(floating(facts.type), "npu::", op, ": ", name,
                  " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ",
                  torch::headeronly::toString(facts.type), "; convert it with .float().");
  return facts;
}

// `other` has the device and dtype of `first`, whose facts are `expected`.
void check_same(const char* op, const TensorHandle& first, const Facts& expected, const char* first_name,
                const TensorHandle& other, const char* other_name) {
  const Facts facts = facts_of(other);
  STD_TORCH_CHECK(facts.device == expected.device, "npu::", op, ": expected ", other_name, " on ",
                  torchplug::stable::device_name(first.tensor()), " like ", first_name, ", but it is on ",
                  torchplug::stable::device_name(other.tensor()), "; move it with .to(", first_name, ".device).");
  STD_TORCH_CHECK(facts.type == expected.type, "npu::", op, ": ", other_name, " has dtype ",
                  torch::headeronly::toString(facts.type), " but ", first_name, " has ",
                  torch::headeronly::toString(expected.type), "; cast one of them.");
}

// A backward's incoming gradient: the input's device, dtype and shape.
void check_grad(const char* op, const TensorHandle& grad, const TensorHandle& self, const Facts& facts) {
  check_same(op, self, facts, "input", grad, "grad");
  STD_TORCH_CHECK(grad.sizes().equals(self.sizes()), "npu::", op, ": grad has shape ", shape_of(grad),
                  " but the input has ", shape_of(self), ".");
}

// The input's facts.
Facts check_rms_norm_arguments(const char* op, const TensorHandle& self, const TensorHandle& weight, double eps) {
  const Facts facts = check_floating(op, "input", self);
  check_same(op, self, facts, "input", weight, "weight");
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = self.sizes();
  STD_TORCH_CHECK(!sizes.empty(), "npu::", op, ": input must have at least one dimension.");
  const int64_t columns = sizes.back();
  const torch::headeronly::IntHeaderOnlyArrayRef weight_sizes = weight.sizes();
  STD_TORCH_CHECK(weight_sizes.size() == 1 && weight_sizes[0] == columns, "npu::", op,
                  ": weight must be 1-D with as many elements as the input's last dimension (", columns,
                  "), got shape ", shape_of(weight), ".");
  STD_TORCH_CHECK(eps >= 0, "npu::", op, ": eps must be non-negative, got ", eps, ".");
  return facts;
}

// `tensor` itself when it is contiguous (torch::stable::contiguous is a
// boxed dispatcher call by name even then).
TensorHandle dense(TensorHandle tensor) {
  if (tensor.is_contiguous()) {
    return tensor;
  }
  return TensorHandle(torch::stable::contiguous(tensor.tensor()));
}

// A new contiguous tensor of `sizes` and of the element type and device of
// `facts`, from the C shim's allocation (torch::stable::empty_like goes
// through the boxed dispatcher).
TensorHandle empty_contiguous(torch::headeronly::IntHeaderOnlyArrayRef sizes, const Facts& facts) {
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
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(dims, layout.data(), layout.data() + dims, facts.dtype,
                                                         facts.device_type, facts.device.index(), &allocated));
  return TensorHandle(allocated);
}

TensorHandle empty_contiguous_like(const TensorHandle& model, const Facts& facts) {
  return empty_contiguous(model.sizes(), facts);
}

// The rows and columns of a normalisation over the last dimension of a
// tensor of `sizes` (at least one).
std::pair<int64_t, int64_t> rows_and_columns(torch::headeronly::IntHeaderOnlyArrayRef sizes) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < sizes.size(); ++d) {
    rows *= sizes[d];
  }
  return {rows, sizes.back()};
}

// Runs `body(T{})` for the element type T of `facts` as the kernel `name`,
// which reads and writes the memory at `pointers`.
template <typename Body>
void run_kernel(const char* name, const Facts& facts, std::initializer_list<const void*> pointers, Body&& body) {
  const torchplug::stable::KernelScope scope(name, facts.device, pointers);
  with_floating_type(facts.type, std::forward<Body>(body));
}

// y = fast_gelu(x) for contiguous x and y of x's facts, as the kernel `name`.
void run_fast_gelu(const char* name, const Facts& facts, const TensorHandle& x, const TensorHandle& y) {
  const void* in = x.data();
  void* out = y.data();
  run_kernel(name, facts, {in, out}, [&](auto element) {
    using T = decltype(element);
    fast_gelu_loop(static_cast<const T*>(in), static_cast<T*>(out), x.numel());
  });
}

}  // namespace

TensorHandle fast_gelu(TensorHandle self) {
  const Facts facts = check_floating("fast_gelu", "input", self);
  const TensorHandle x = dense(std::move(self));
  TensorHandle y = empty_contiguous_like(x, facts);
  run_fast_gelu("npu::fast_gelu", facts, x, y);
  return y;
}

TensorHandle fast_gelu_out(TensorHandle self, TensorHandle out) {
  const Facts facts = check_floating("fast_gelu.out", "input", self);
  check_same("fast_gelu.out", self, facts, "input", out, "out");
  torch::stable::Tensor out_tensor = out.tensor();
  torchplug::stable::resize_output(out_tensor, self.sizes());
  const torch::stable::Tensor self_tensor = self.tensor();
  torchplug::stable::check_no_overlap(/*inputs=*/{self_tensor}, /*outputs=*/{out_tensor});
  // A strided out= tensor takes the result through a contiguous buffer, as
  // CUDA's out= kernels do.
  const TensorHandle x = dense(std::move(self));
  if (out.is_contiguous()) {
    run_fast_gelu("npu::fast_gelu.out", facts, x, out);
  } else {
    const TensorHandle y = empty_contiguous_like(x, facts);
    run_fast_gelu("npu::fast_gelu.out", facts, x, y);
    torch::stable::copy_(out_tensor, y.tensor());
  }
  return out;
}

TensorHandle fast_gelu_backward(TensorHandle grad, TensorHandle self) {
  const Facts facts = check_floating("fast_gelu_backward", "input", self);
  check_grad("fast_gelu_backward", grad, self, facts);
  const TensorHandle x = dense(std::move(self));
  const TensorHandle g = dense(std::move(grad));
  TensorHandle grad_x = empty_contiguous_like(x, facts);
  const void* in = x.data();
  const void* incoming = g.data();
  void* out = grad_x.data();
  run_kernel("npu::fast_gelu_backward", facts, {incoming, in, out}, [&](auto element) {
    using T = decltype(element);
    fast_gelu_backward_loop(static_cast<const T*>(incoming), static_cast<const T*>(in), static_cast<T*>(out),
                            x.numel());
  });
  return grad_x;
}

TensorHandle rms_norm(TensorHandle self, TensorHandle weight, double eps) {
  const Facts facts = check_rms_norm_arguments("rms_norm", self, weight, eps);
  const TensorHandle x = dense(std::move(self));
  const TensorHandle w = dense(std::move(weight));
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = x.sizes();
  TensorHandle y = empty_contiguous(sizes, facts);
  const auto [rows, columns] = rows_and_columns(sizes);
  const void* in = x.data();
  const void* scale = w.data();
  void* out = y.data();
  run_kernel("npu::rms_norm", facts, {in, scale, out}, [&](auto element) {
    using T = decltype(element);
    rms_norm_loop(static_cast<const T*>(in), static_cast<const T*>(scale), static_cast<T*>(out), rows, columns,
                  eps);
  });
  return y;
}

std::tuple<TensorHandle, TensorHandle> rms_norm_backward(TensorHandle grad, TensorHandle self, TensorHandle weight,
                                                         double eps) {
  const Facts facts = check_rms_norm_arguments("rms_norm_backward", self, weight, eps);
  check_grad("rms_norm_backward", grad, self, facts);
  const TensorHandle x = dense(std::move(self));
  const TensorHandle w = dense(std::move(weight));
  const TensorHandle g = dense(std::move(grad));
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = x.sizes();
  TensorHandle grad_x = empty_contiguous(sizes, facts);
  TensorHandle grad_weight = empty_contiguous_like(w, facts);
  const auto [rows, columns] = rows_and_columns(sizes);
  const void* incoming = g.data();
  const void* in = x.data();
  const void* scale = w.data();
  void* out = grad_x.data();
  void* scale_out = grad_weight.data();
  run_kernel("npu::rms_norm_backward", facts, {incoming, in, scale, out, scale_out}, [&](auto element) {
    using T = decltype(element);
    rms_norm_backward_loop(static_cast<const T*>(incoming), static_cast<const T*>(in), static_cast<const T*>(scale),
                           static_cast<T*>(out), static_cast<T*>(scale_out), rows, columns, eps);
  });
  return {std::move(grad_x), std::move(grad_weight)};
}

}  // namespace torch_vnpu
