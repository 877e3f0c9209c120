// Kernels that run inside a device whose memory the host cannot address: the
// core's device kernels (device_kernels/kernel_abi.h), loaded into the device
// through the driver's kernel-module extension and launched on the current
// stream, so neither operands nor results cross to the host. Each covers the
// common case of its operator (dense operands of one float type on one
// device); any other call takes the copying CPU fallback, as an operator
// without a device kernel does.
#include <algorithm>
#include <initializer_list>
#include <tuple>
#include <vector>
#include <optional>

#include <ATen/core/Tensor.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_safe_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ScalarOps.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/string_view.h>

#include "device_kernels/kernel_abi.h"
#include "kernels/cpu_fallback.h"
#include "kernels/wrapped_numbers.h"
#include "kernels/device_copy.h"
#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

// ------------------------------------------------------------ binary arithmetic

// A second operand the kernels take as a number: a 0-dim host tensor (a
// Python number) that leaves the result's type as the first operand's.
std::optional<double> host_scalar(const at::Tensor& self, const at::Tensor& other) {
  if (other.dim() != 0 || !other.device().is_cpu() || other.is_complex() ||
      promoted_type(self, other) != self.scalar_type()) {
    return std::nullopt;
  }
  return other.item<double>();
}

// What a binary kernel needs beyond its operands: null `other` and its value
// as `scalar` when it is a host number.
struct BinaryOperands {
  at::Tensor other;
  double scalar = 0.0;
};

// The operands of `self op other` when the kernels cover the call.
std::optional<BinaryOperands> binary_operands(const at::Tensor& self, const at::Tensor& other,
                                              const c10::Scalar& alpha) {
  if (!dense_on(self, self.device()) || alpha.isComplex()) {
    return std::nullopt;
  }
  if (dense_like(other, self)) {
    return BinaryOperands{other};
  }
  if (const std::optional<double> scalar = host_scalar(self, other)) {
    return BinaryOperands{at::Tensor(), *scalar};
  }
  return std::nullopt;
}

void launch_binary(const at::Tensor& out, const at::Tensor& self, const BinaryOperands& operands, dk::BinaryOp op,
                   const c10::Scalar& alpha) {
  if (self.numel() > 0) {
    launch(dk::kBinary, self.device(),
           {pointer(out), pointer(self), pointer(operands.other), integer(self.numel()), dtype_of(self), code(op),
            number(alpha.toDouble()), number(operands.scalar)});
  }
}

// The shape `self op other` broadcasts to, when the broadcast kernel covers
// the call: two device tensors of one type the kernels take, on one device,
// of any strides, with at most kMaxBroadcastDims dimensions.
std::optional<std::vector<int64_t>> broadcast_shape(const at::Tensor& self, const at::Tensor& other) {
  const auto plain = [&](const at::Tensor& tensor) {
    return tensor.defined() && tensor.device() == self.device() && tensor.layout() == c10::kStrided &&
           tensor.scalar_type() == self.scalar_type() && !tensor.is_conj() && !tensor.is_neg();
  };
  if (self.device().is_cpu() || !plain(self) || !plain(other) || !kernel_dtype(self.scalar_type()).has_value()) {
    return std::nullopt;
  }
  const int64_t dims = std::max(self.dim(), other.dim());
  if (dims > dk::kMaxBroadcastDims) {
    return std::nullopt;
  }
  std::vector<int64_t> shape(dims);
  for (int64_t d = 0; d < dims; ++d) {
    const int64_t from_end = dims - d;
    const int64_t left = from_end <= self.dim() ? self.size(-from_end) : 1;
    const int64_t right = from_end <= other.dim() ? other.size(-from_end) : 1;
    if (left != right && left != 1 && right != 1) {
      return std::nullopt;  // torch's own error, through the fallback
    }
    shape[d] = left == 1 ? right : left;
  }
  return shape;
}

// out (dense, of the broadcast shape; self itself when in place) = self op other.
void launch_broadcast(const at::Tensor& out, const at::Tensor& self, const at::Tensor& other, dk::BinaryOp op,
                      const c10::Scalar& alpha) {
  if (out.numel() == 0) {
    return;
  }
  const at::Tensor left = self.expand(out.sizes());
  const at::Tensor right = other.expand(out.sizes());
  const int64_t dims = std::max<int64_t>(out.dim(), 1);
  std::vector<TPD_KernelArg> args{pointer(out),    pointer(left),  pointer(right),
                                  integer(dims),   dtype_of(out),  code(op),
                                  number(alpha.toDouble())};
  if (out.dim() == 0) {
    args.insert(args.end(), {integer(1), integer(0), integer(0)});
  }
  for (int64_t d = 0; d < out.dim(); ++d) {
    args.insert(args.end(), {integer(out.size(d)), integer(left.stride(d)), integer(right.stride(d))});
  }
  launch(dk::kBinaryBroadcast, out.device(), args.data(), args.size());
}

// self op other by the broadcast kernel, if it covers the call.
std::optional<at::Tensor> broadcast_binary(const at::Tensor& self, const at::Tensor& other, dk::BinaryOp op,
                                           const c10::Scalar& alpha) {
  if (alpha.isComplex()) {
    return std::nullopt;
  }
  const std::optional<std::vector<int64_t>> shape = broadcast_shape(self, other);
  if (!shape) {
    return std::nullopt;
  }
  at::Tensor out = at::empty(*shape, self.options());
  launch_broadcast(out, self, other, op, alpha);
  return out;
}

// In place: self is dense of the broadcast shape and other is not a view of it.
bool broadcast_binary_in_place(const at::Tensor& self, const at::Tensor& other, dk::BinaryOp op,
                               const c10::Scalar& alpha) {
  const std::optional<std::vector<int64_t>> shape = broadcast_shape(self, other);
  if (alpha.isComplex() || !shape || !dense_on(self, self.device()) || self.sizes() != c10::IntArrayRef(*shape) ||
      other.storage().is_alias_of(self.storage())) {
    return false;
  }
  launch_broadcast(self, self, other, op, alpha);
  return true;
}

// self op other, out of place, when the kernels cover the call: dense
// operands, two device tensors of any strides by the broadcast kernel, or a
// strided `self` and a host number, as flat_operands lays them out.
std::optional<at::Tensor> binary_on_device(const at::Tensor& self, const at::Tensor& other, dk::BinaryOp op,
                                           const c10::Scalar& alpha) {
  // Two device tensors of two types (a float and an integer count, say): both
  // converted inside the device to the type of the result, as the CPU's loop
  // converts each element before the operation.
  if (self.scalar_type() != other.scalar_type() && !self.device().is_cpu() && other.device() == self.device()) {
    const c10::ScalarType type = promoted_type(self, other);
    if (!kernel_dtype(type).has_value()) {
      return std::nullopt;
    }
    return binary_on_device(self.to(type), other.to(type), op, alpha);
  }
  if (const auto operands = binary_operands(self, other, alpha)) {
    at::Tensor out = at::empty(self.sizes(), self.options());
    launch_binary(out, self, *operands, op, alpha);
    return out;
  }
  if (auto out = broadcast_binary(self, other, op, alpha)) {
    return out;
  }
  const std::optional<double> scalar = host_scalar(self, other);
  const std::optional<FlatOperands> flat = scalar && !alpha.isComplex() ? flat_operands(self) : std::nullopt;
  if (!flat) {
    return std::nullopt;
  }
  launch_binary(flat->out, flat->in, BinaryOperands{at::Tensor(), *scalar}, op, alpha);
  return flat->out;
}

template <typename Op, dk::BinaryOp kOp>
at::Tensor binary(const at::Tensor& self, const at::Tensor& other) {
  if (auto out = binary_on_device(self, other, kOp, 1)) {
    return *out;
  }
  return call_through_fallback<Op>(fallback_keys(self, other), self, other);
}

template <typename Op, dk::BinaryOp kOp>
at::Tensor binary_alpha(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  if (auto out = binary_on_device(self, other, kOp, alpha)) {
    return *out;
  }
  return call_through_fallback<Op>(fallback_keys(self, other), self, other, alpha);
}

// self op a Python number (mul.Scalar, div.Scalar): as with a 0-dim host tensor.
template <typename Op, dk::BinaryOp kOp>
at::Tensor binary_scalar(const at::Tensor& self, const c10::Scalar& other) {
  if (!other.isComplex() && !self.device().is_cpu()) {
    if (auto out = binary_on_device(self, at::native::wrapped_scalar_tensor(other), kOp, 1)) {
      return *out;
    }
  }
  return call_through_fallback<Op>(fallback_keys(self), self, other);
}

template <typename Op, dk::BinaryOp kOp>
at::Tensor& binary_in_place(at::Tensor& self, const at::Tensor& other) {
  if (const auto operands = binary_operands(self, other, 1)) {
    launch_binary(self, self, *operands, kOp, 1);
    return self;
  }
  if (broadcast_binary_in_place(self, other, kOp, 1)) {
    return self;
  }
  return call_through_fallback<Op>(fallback_keys(self, other), self, other);
}

template <typename Op, dk::BinaryOp kOp>
at::Tensor& binary_alpha_in_place(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  if (const auto operands = binary_operands(self, other, alpha)) {
    launch_binary(self, self, *operands, kOp, alpha);
    return self;
  }
  if (broadcast_binary_in_place(self, other, kOp, alpha)) {
    return self;
  }
  return call_through_fallback<Op>(fallback_keys(self, other), self, other, alpha);
}

// self ** exponent, a real number.
at::Tensor pow_scalar(const at::Tensor& self, const c10::Scalar& exponent) {
  if (dense_on(self, self.device()) && !exponent.isComplex()) {
    at::Tensor out = at::empty(self.sizes(), self.options());
    launch_binary(out, self, BinaryOperands{at::Tensor(), exponent.toDouble()}, dk::BinaryOp::kPow, 1);
    return out;
  }
  return call_through_fallback<at::_ops::pow_Tensor_Scalar>(fallback_keys(self), self, exponent);
}

// ------------------------------------------------------------ activations

void launch_unary(const at::Tensor& out, const at::Tensor& self, dk::UnaryOp op) {
  if (self.numel() > 0) {
    launch(dk::kUnary, self.device(), {pointer(out), pointer(self), integer(self.numel()), dtype_of(self), code(op)});
  }
}

template <typename Op, dk::UnaryOp kOp>
at::Tensor unary(const at::Tensor& self) {
  if (const std::optional<FlatOperands> flat = flat_operands(self)) {
    launch_unary(flat->out, flat->in, kOp);
    return flat->out;
  }
  return call_through_fallback<Op>(fallback_keys(self), self);
}

template <typename Op, dk::UnaryOp kOp>
at::Tensor& unary_in_place(at::Tensor& self) {
  if (dense_on(self, self.device())) {
    launch_unary(self, self, kOp);
    return self;
  }
  return call_through_fallback<Op>(fallback_keys(self), self);
}

std::optional<dk::UnaryOp> gelu_op(c10::string_view approximate) {
  if (approximate == "none") {
    return dk::UnaryOp::kGelu;
  }
  if (approximate == "tanh") {
    return dk::UnaryOp::kGeluTanh;
  }
  return std::nullopt;
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  const std::optional<dk::UnaryOp> op = gelu_op(approximate);
  if (op.has_value() && dense_on(self, self.device())) {
    at::Tensor out = at::empty(self.sizes(), self.options());
    launch_unary(out, self, *op);
    return out;
  }
  return call_through_fallback<at::_ops::gelu>(fallback_keys(self), self, approximate);
}

// grad_output times the gradient of `op` at `saved` (see kernel_abi.h).
// A strided `saved` (a slice of a fused projection, say) is read through a
// contiguous copy; the result is contiguous, as the CPU's is for a contiguous
// grad_output.
std::optional<at::Tensor> unary_gradient(const at::Tensor& grad_output, const at::Tensor& saved_input,
                                         dk::UnaryOp op) {
  if (!dense_on(grad_output, grad_output.device())) {
    return std::nullopt;
  }
  const at::Tensor saved = contiguous_inside_device(saved_input);
  if (!dense_like(saved, grad_output)) {
    return std::nullopt;
  }
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options());
  if (grad_output.numel() > 0) {
    launch(dk::kUnaryBackward, grad_output.device(),
           {pointer(grad_input), pointer(grad_output), pointer(saved), integer(grad_output.numel()),
            dtype_of(grad_output), code(op)});
  }
  return grad_input;
}

template <typename Op, dk::UnaryOp kOp>
at::Tensor unary_backward(const at::Tensor& grad_output, const at::Tensor& saved) {
  if (auto grad_input = unary_gradient(grad_output, saved, kOp)) {
    return *grad_input;
  }
  return call_through_fallback<Op>(fallback_keys(grad_output, saved), grad_output, saved);
}

// relu's backward: threshold 0 over relu's output (or input: the same signs).
at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self, const c10::Scalar& threshold) {
  if (!threshold.isComplex() && threshold.toDouble() == 0.0) {
    if (auto grad_input = unary_gradient(grad_output, self, dk::UnaryOp::kRelu)) {
      return *grad_input;
    }
  }
  return call_through_fallback<at::_ops::threshold_backward>(fallback_keys(grad_output, self), grad_output, self,
                                                             threshold);
}

at::Tensor gelu_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  if (const std::optional<dk::UnaryOp> op = gelu_op(approximate)) {
    if (auto grad_input = unary_gradient(grad_output, self, *op)) {
      return *grad_input;
    }
  }
  return call_through_fallback<at::_ops::gelu_backward>(fallback_keys(grad_output, self), grad_output, self,
                                                        approximate);
}

// ------------------------------------------------------------ matrix products

bool gemm_operand(const at::Tensor& tensor, const at::Tensor& model) {
  return tensor.defined() && !model.device().is_cpu() && tensor.device() == model.device() && tensor.dim() == 2 &&
         tensor.layout() == c10::kStrided && tensor.scalar_type() == model.scalar_type() && !tensor.is_conj() &&
         !tensor.is_neg() && tensor.stride(0) >= 0 && tensor.stride(1) >= 0;
}

bool shares_storage(const at::Tensor& tensor, const at::Tensor& other) {
  return other.defined() && tensor.storage().is_alias_of(other.storage());
}

// An out= destination the kernel writes as it is: dense, of the result's shape
// and type, overlapping no operand (the kernel reads them while it writes).
bool gemm_destination(const at::Tensor& into, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias,
                      int64_t m, int64_t n) {
  return dense_on(into, a.device()) && into.scalar_type() == a.scalar_type() && into.dim() == 2 &&
         into.size(0) == m && into.size(1) == n && !shares_storage(into, a) && !shares_storage(into, b) &&
         (bias == nullptr || !shares_storage(into, *bias));
}

// out = beta * bias + alpha * (a @ b), into `into` (a new tensor when it is
// undefined), when the kernels cover the call.
std::optional<at::Tensor> gemm(const at::Tensor* bias, const at::Tensor& a, const at::Tensor& b, double beta,
                               double alpha, const at::Tensor& into = at::Tensor()) {
  if (!kernel_dtype(a.scalar_type()).has_value() || !gemm_operand(a, a) || !gemm_operand(b, a) ||
      a.size(1) != b.size(0)) {
    return std::nullopt;
  }
  const int64_t m = a.size(0);
  const int64_t n = b.size(1);
  if (into.defined() && !gemm_destination(into, a, b, bias, m, n)) {
    return std::nullopt;
  }
  int64_t bias_strides[2] = {0, 0};
  if (bias != nullptr) {
    if (!bias->defined() || bias->device() != a.device() || bias->scalar_type() != a.scalar_type() ||
        bias->dim() > 2 || bias->is_conj() || bias->is_neg() || bias->layout() != c10::kStrided) {
      return std::nullopt;
    }
    // Right-aligned, as broadcasting reads it: size-1 dimensions repeat.
    const int64_t sizes[2] = {m, n};
    for (int64_t d = 0; d < bias->dim(); ++d) {
      const int64_t target = 2 - bias->dim() + d;
      if (bias->size(d) != 1 && bias->size(d) != sizes[target]) {
        return std::nullopt;
      }
      bias_strides[target] = bias->size(d) == 1 ? 0 : bias->stride(d);
    }
  }
  at::Tensor out = into.defined() ? into : at::empty({m, n}, a.options());
  if (out.numel() > 0) {
    launch(dk::kGemm, a.device(),
           {pointer(out), pointer(a), pointer(b), pointer(bias != nullptr ? *bias : at::Tensor()), integer(m),
            integer(n), integer(a.size(1)), integer(a.stride(0)), integer(a.stride(1)), integer(b.stride(0)),
            integer(b.stride(1)), integer(bias_strides[0]), integer(bias_strides[1]), dtype_of(a), number(beta),
            number(alpha)});
  }
  return out;
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (auto out = gemm(nullptr, self, mat2, 0.0, 1.0)) {
    return *out;
  }
  return call_through_fallback<at::_ops::mm>(fallback_keys(self, mat2), self, mat2);
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  if (!beta.isComplex() && !alpha.isComplex()) {
    if (auto out = gemm(&self, mat1, mat2, beta.toDouble(), alpha.toDouble())) {
      return *out;
    }
  }
  return call_through_fallback<at::_ops::addmm>(fallback_keys(self, mat1, mat2), self, mat1, mat2, beta, alpha);
}

// All the batch's products in one launch, each entry read through its strides.
at::Tensor bmm_on_device(const at::Tensor& self, const at::Tensor& mat2) {
  const auto batched_operand = [&](const at::Tensor& tensor) {
    return tensor.dim() == 3 && tensor.device() == self.device() && tensor.layout() == c10::kStrided &&
           tensor.scalar_type() == self.scalar_type() && !tensor.is_conj() && !tensor.is_neg() &&
           tensor.stride(0) >= 0 && tensor.stride(1) >= 0 && tensor.stride(2) >= 0;
  };
  if (!self.device().is_cpu() && kernel_dtype(self.scalar_type()).has_value() && batched_operand(self) &&
      batched_operand(mat2) && self.size(0) == mat2.size(0) && self.size(2) == mat2.size(1)) {
    at::Tensor out = at::empty({self.size(0), self.size(1), mat2.size(2)}, self.options());
    if (out.numel() > 0) {
      launch(dk::kGemmBatched, self.device(),
             {pointer(out), pointer(self), pointer(mat2), integer(self.size(0)), integer(self.size(1)),
              integer(mat2.size(2)), integer(self.size(2)), integer(self.stride(0)), integer(self.stride(1)),
              integer(self.stride(2)), integer(mat2.stride(0)), integer(mat2.stride(1)), integer(mat2.stride(2)),
              dtype_of(self)});
    }
    return out;
  }
  return call_through_fallback<at::_ops::bmm>(fallback_keys(self, mat2), self, mat2);
}

// Inductor calls the out= variants (extern_kernels.mm(a, b, out=buffer)).
at::Tensor& mm_out_on_device(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (gemm(nullptr, self, mat2, 0.0, 1.0, out)) {
    return out;
  }
  return call_through_fallback<at::_ops::mm_out>(fallback_keys(self, mat2, out), self, mat2, out);
}

at::Tensor& addmm_out_on_device(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  if (!beta.isComplex() && !alpha.isComplex() && gemm(&self, mat1, mat2, beta.toDouble(), alpha.toDouble(), out)) {
    return out;
  }
  return call_through_fallback<at::_ops::addmm_out>(fallback_keys(self, mat1, mat2, out), self, mat1, mat2, beta,
                                                     alpha, out);
}

// ------------------------------------------------------------ softmax

bool over_last_dimension(const at::Tensor& tensor, int64_t dim) {
  return tensor.dim() > 0 && c10::maybe_wrap_dim(dim, tensor.dim()) == tensor.dim() - 1;
}

std::optional<at::Tensor> softmax_forward(const at::Tensor& self, int64_t dim, bool half_to_float,
                                          dk::SoftmaxMode mode) {
  if (half_to_float || !dense_on(self, self.device()) || !over_last_dimension(self, dim)) {
    return std::nullopt;
  }
  at::Tensor out = at::empty(self.sizes(), self.options());
  const int64_t columns = self.size(-1);
  if (self.numel() > 0) {
    launch(dk::kSoftmax, self.device(),
           {pointer(out), pointer(self), integer(self.numel() / columns), integer(columns), dtype_of(self),
            code(mode)});
  }
  return out;
}

// Strided operands (a broadcast gradient) are read through contiguous copies;
// the CPU's result is contiguous whatever their layout.
std::optional<at::Tensor> softmax_gradient(const at::Tensor& strided_grad_output, const at::Tensor& strided_output,
                                           int64_t dim, c10::ScalarType input_dtype, bool log) {
  const at::Tensor grad_output = contiguous_inside_device(strided_grad_output);
  const at::Tensor output = contiguous_inside_device(strided_output);
  if (input_dtype != grad_output.scalar_type() || !dense_on(grad_output, grad_output.device()) ||
      !dense_like(output, grad_output) || !over_last_dimension(output, dim)) {
    return std::nullopt;
  }
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options());
  const int64_t columns = output.size(-1);
  if (output.numel() > 0) {
    launch(dk::kSoftmaxBackward, output.device(),
           {pointer(grad_input), pointer(grad_output), pointer(output), integer(output.numel() / columns),
            integer(columns), dtype_of(output), integer(log ? 1 : 0)});
  }
  return grad_input;
}

template <typename Op, bool kLog>
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  const dk::SoftmaxMode mode = kLog ? dk::SoftmaxMode::kLogSoftmax : dk::SoftmaxMode::kSoftmax;
  if (auto out = softmax_forward(self, dim, half_to_float, mode)) {
    return *out;
  }
  return call_through_fallback<Op>(fallback_keys(self), self, dim, half_to_float);
}

// What attention runs: softmax, with zeros for a row masked out entirely.
at::Tensor safe_softmax(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  if (!dtype.has_value() || *dtype == self.scalar_type()) {
    if (auto out = softmax_forward(self, dim, false, dk::SoftmaxMode::kSafe)) {
      return *out;
    }
  }
  return call_through_fallback<at::_ops::_safe_softmax>(fallback_keys(self), self, dim, dtype);
}

template <typename Op, bool kLog>
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype) {
  if (auto grad_input = softmax_gradient(grad_output, output, dim, input_dtype, kLog)) {
    return *grad_input;
  }
  return call_through_fallback<Op>(fallback_keys(grad_output, output), grad_output, output, dim, input_dtype);
}

// ------------------------------------------------------------ sums

// The sum of `self` over `dims` (all when empty) when they are adjacent
// dimensions: `self` read as (outer, reduce, inner).
// A strided `self` (a broadcast gradient, summed over the copies it was
// broadcast to) is read through a contiguous copy; the CPU's result is
// contiguous whatever self's layout.
std::optional<at::Tensor> sum_over(const at::Tensor& strided_self, std::vector<int64_t> dims, bool keepdim,
                                   std::optional<c10::ScalarType> dtype) {
  const at::Tensor self =
      kernel_dtype(strided_self.scalar_type()).has_value() ? contiguous_inside_device(strided_self) : strided_self;
  if (!dense_on(self, self.device()) || (dtype.has_value() && *dtype != self.scalar_type())) {
    return std::nullopt;
  }
  const int64_t rank = self.dim();
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) {
      dims.push_back(d);
    }
  }
  for (int64_t& d : dims) {
    d = c10::maybe_wrap_dim(d, std::max<int64_t>(rank, 1));
  }
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end() ||
      (!dims.empty() && dims.back() - dims.front() + 1 != static_cast<int64_t>(dims.size()))) {
    return std::nullopt;  // repeated, or not adjacent: the fallback reports or serves it
  }
  int64_t outer = 1, reduce = 1, inner = 1;
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = !dims.empty() && d >= dims.front() && d <= dims.back();
    (reduced ? reduce : (dims.empty() || d < dims.front() ? outer : inner)) *= self.size(d);
    if (!reduced) {
      sizes.push_back(self.size(d));
    } else if (keepdim) {
      sizes.push_back(1);
    }
  }
  at::Tensor out = at::empty(sizes, self.options());
  if (out.numel() > 0) {
    launch(dk::kSum, self.device(),
           {pointer(out), pointer(self), integer(outer), integer(reduce), integer(inner), dtype_of(self)});
  }
  return out;
}

at::Tensor sum_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  std::vector<int64_t> dims = dim.has_value() ? dim->vec() : std::vector<int64_t>();
  if (auto out = sum_over(self, dims, keepdim, dtype)) {
    return *out;
  }
  return call_through_fallback<at::_ops::sum_dim_IntList>(fallback_keys(self), self, dim, keepdim, dtype);
}

at::Tensor sum_all(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (auto out = sum_over(self, {}, false, dtype)) {
    return *out;
  }
  return call_through_fallback<at::_ops::sum>(fallback_keys(self), self, dtype);
}

// The mean as the CPU computes it: the sum, divided by the count it summed.
at::Tensor mean_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype) {
  std::vector<int64_t> dims = dim.has_value() ? dim->vec() : std::vector<int64_t>();
  if (auto out = sum_over(self, dims, keepdim, dtype)) {
    // A 0-dim tensor takes dim 0 or -1 as its only element.
    int64_t count = dims.empty() || self.dim() == 0 ? self.numel() : 1;
    for (const int64_t d : self.dim() == 0 ? std::vector<int64_t>() : dims) {
      count *= self.size(d);
    }
    launch_binary(*out, *out, BinaryOperands{at::Tensor(), static_cast<double>(count)}, dk::BinaryOp::kDiv, 1);
    return *out;
  }
  return call_through_fallback<at::_ops::mean_dim>(fallback_keys(self), self, dim, keepdim, dtype);
}

// ------------------------------------------------------------ nll_loss

// What the loss kernels take: `self` (N x C or C) dense, int64 targets of its
// rows on its device, a dense per-class weight or none.
bool nll_loss_operands(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                       int64_t reduction) {
  if (!dense_on(self, self.device()) || (self.dim() != 1 && self.dim() != 2) || reduction < 0 || reduction > 2) {
    return false;
  }
  const int64_t rows = self.dim() == 2 ? self.size(0) : 1;
  if (!target.defined() || target.device() != self.device() || target.scalar_type() != c10::kLong ||
      !target.is_contiguous() || target.numel() != rows || target.dim() != self.dim() - 1) {
    return false;
  }
  return !weight.has_value() || !weight->defined() ||
         (dense_like(*weight, *weight) && weight->device() == self.device() &&
          weight->scalar_type() == self.scalar_type() && weight->dim() == 1 && weight->numel() == self.size(-1));
}

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                                    c10::SymInt ignore_index) {
  const std::optional<int64_t> ignore = ignore_index.maybe_as_int();
  if (ignore.has_value() && nll_loss_operands(self, target, weight, reduction)) {
    const int64_t rows = self.dim() == 2 ? self.size(0) : 1;
    at::Tensor output = reduction == 0 && self.dim() == 2 ? at::empty({rows}, self.options()) : at::empty({}, self.options());
    at::Tensor total_weight = at::empty({}, self.options());
    launch(dk::kNllLoss, self.device(),
           {pointer(output), pointer(total_weight), pointer(self), pointer(target), pointer(defined_or_none(weight)),
            integer(rows), integer(self.size(-1)), integer(reduction), integer(*ignore), dtype_of(self)});
    return {output, total_weight};
  }
  return call_through_fallback<at::_ops::nll_loss_forward>(fallback_keys(self, target), self, target, weight,
                                                           reduction, ignore_index);
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, c10::SymInt ignore_index,
                             const at::Tensor& total_weight) {
  const std::optional<int64_t> ignore = ignore_index.maybe_as_int();
  const bool grad_fits = ignore.has_value() && dense_on(grad_output, self.device()) && grad_output.scalar_type() == self.scalar_type() &&
                         grad_output.numel() == (reduction == 0 && self.dim() == 2 ? self.size(0) : 1);
  if (grad_fits && nll_loss_operands(self, target, weight, reduction) && dense_like(total_weight, total_weight) &&
      total_weight.device() == self.device() && total_weight.scalar_type() == self.scalar_type() &&
      total_weight.numel() == 1) {
    at::Tensor grad_input = at::empty(self.sizes(), self.options());
    const int64_t rows = self.dim() == 2 ? self.size(0) : 1;
    launch(dk::kNllLossBackward, self.device(),
           {pointer(grad_input), pointer(grad_output), pointer(target), pointer(defined_or_none(weight)),
            pointer(total_weight), integer(rows), integer(self.size(-1)), integer(reduction),
            integer(*ignore), dtype_of(self)});
    return grad_input;
  }
  return call_through_fallback<at::_ops::nll_loss_backward>(fallback_keys(grad_output, self, target), grad_output,
                                                            self, target, weight, reduction, ignore_index,
                                                            total_weight);
}

}  // namespace

void register_module_kernels(DeviceKernels& library) {
  using dk::BinaryOp;
  using dk::UnaryOp;
  library.impl("add.Tensor", TORCH_FN((binary_alpha<at::_ops::add_Tensor, BinaryOp::kAdd>)));
  library.impl("sub.Tensor", TORCH_FN((binary_alpha<at::_ops::sub_Tensor, BinaryOp::kSub>)));
  library.impl("mul.Tensor", TORCH_FN((binary<at::_ops::mul_Tensor, BinaryOp::kMul>)));
  library.impl("div.Tensor", TORCH_FN((binary<at::_ops::div_Tensor, BinaryOp::kDiv>)));
  library.impl("add_.Tensor", TORCH_FN((binary_alpha_in_place<at::_ops::add__Tensor, BinaryOp::kAdd>)));
  library.impl("sub_.Tensor", TORCH_FN((binary_alpha_in_place<at::_ops::sub__Tensor, BinaryOp::kSub>)));
  library.impl("mul_.Tensor", TORCH_FN((binary_in_place<at::_ops::mul__Tensor, BinaryOp::kMul>)));
  library.impl("div_.Tensor", TORCH_FN((binary_in_place<at::_ops::div__Tensor, BinaryOp::kDiv>)));
  library.impl("mul.Scalar", TORCH_FN((binary_scalar<at::_ops::mul_Scalar, BinaryOp::kMul>)));
  library.impl("div.Scalar", TORCH_FN((binary_scalar<at::_ops::div_Scalar, BinaryOp::kDiv>)));
  library.impl("neg", TORCH_FN((unary<at::_ops::neg, UnaryOp::kNeg>)));
  library.impl("relu", TORCH_FN((unary<at::_ops::relu, UnaryOp::kRelu>)));
  library.impl("relu_", TORCH_FN((unary_in_place<at::_ops::relu_, UnaryOp::kRelu>)));
  library.impl("sigmoid", TORCH_FN((unary<at::_ops::sigmoid, UnaryOp::kSigmoid>)));
  library.impl("tanh", TORCH_FN((unary<at::_ops::tanh, UnaryOp::kTanh>)));
  library.impl("exp", TORCH_FN((unary<at::_ops::exp, UnaryOp::kExp>)));
  library.impl("silu", TORCH_FN((unary<at::_ops::silu, UnaryOp::kSilu>)));
  library.impl("rsqrt", TORCH_FN((unary<at::_ops::rsqrt, UnaryOp::kRsqrt>)));
  library.impl("cos", TORCH_FN((unary<at::_ops::cos, UnaryOp::kCos>)));
  library.impl("sin", TORCH_FN((unary<at::_ops::sin, UnaryOp::kSin>)));
  library.impl("pow.Tensor_Scalar", TORCH_FN(pow_scalar));
  library.impl("gelu", TORCH_FN(gelu));
  library.impl("threshold_backward", TORCH_FN(threshold_backward));
  library.impl("sigmoid_backward", TORCH_FN((unary_backward<at::_ops::sigmoid_backward, UnaryOp::kSigmoid>)));
  library.impl("tanh_backward", TORCH_FN((unary_backward<at::_ops::tanh_backward, UnaryOp::kTanh>)));
  library.impl("gelu_backward", TORCH_FN(gelu_backward));
  library.impl("silu_backward", TORCH_FN((unary_backward<at::_ops::silu_backward, UnaryOp::kSilu>)));
  library.impl("mm", TORCH_FN(mm));
  library.impl("addmm", TORCH_FN(addmm));
  library.impl("mm.out", TORCH_FN(mm_out_on_device));
  library.impl("addmm.out", TORCH_FN(addmm_out_on_device));
  library.impl("bmm", TORCH_FN(bmm_on_device));
  library.impl("_softmax", TORCH_FN((softmax<at::_ops::_softmax, false>)));
  library.impl("_log_softmax", TORCH_FN((softmax<at::_ops::_log_softmax, true>)));
  library.impl("_safe_softmax", TORCH_FN(safe_softmax));
  library.impl("_softmax_backward_data",
               TORCH_FN((softmax_backward<at::_ops::_softmax_backward_data, false>)));
  library.impl("sum", TORCH_FN(sum_all));
  library.impl("sum.dim_IntList", TORCH_FN(sum_dims));
  library.impl("mean.dim", TORCH_FN(mean_dims));
  library.impl("_log_softmax_backward_data",
               TORCH_FN((softmax_backward<at::_ops::_log_softmax_backward_data, true>)));
  library.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  library.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
}

}  // namespace torchplug
