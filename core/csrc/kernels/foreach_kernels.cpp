// The optimizers' foreach steps on a device whose memory the host cannot
// address: each covered call is one launch of the device's foreach kernel
// over the whole tensor list (device_kernels/foreach.cpp), as CUDA's fast path
// is one multi-tensor launch. A call the kernel does not cover (tensors of
// several devices or element types, a view that is not dense, a complex
// scalar, lists of different lengths) takes torch's per-tensor path, whose
// operators run as device kernels or through the copying fallback and which
// raises torch's own errors.
#include <algorithm>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_addcdiv_ops.h>
#include <ATen/ops/_foreach_addcmul_ops.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_lerp_ops.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_sqrt_ops.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>

#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

using dk::ForeachOp;

// The per-tensor scalar of a call: one for every tensor, one each, or none.
class Scalars {
 public:
  Scalars() = default;
  explicit Scalars(const c10::Scalar& scalar) : one_(&scalar) {}
  explicit Scalars(c10::ArrayRef<c10::Scalar> each) : each_(each), per_tensor_(true) {}

  bool fits(size_t tensors) const {
    if (!per_tensor_) {
      return one_ == nullptr || !one_->isComplex();
    }
    return each_.size() == tensors &&
           std::none_of(each_.begin(), each_.end(), [](const c10::Scalar& scalar) { return scalar.isComplex(); });
  }
  double operator[](size_t index) const {
    if (per_tensor_) {
      return each_[index].toDouble();
    }
    return one_ != nullptr ? one_->toDouble() : 0.0;
  }

 private:
  const c10::Scalar* one_ = nullptr;
  c10::ArrayRef<c10::Scalar> each_;
  bool per_tensor_ = false;
};

// Launches `op` over `out` (written; `self` itself when in place) and its
// operands, if the kernel covers the call: every tensor dense on self[0]'s
// device, of its element type, each operand of its tensor's shape.
bool launch_foreach(ForeachOp op, at::TensorList out, at::TensorList self, at::TensorList b, at::TensorList c,
                    const Scalars& scalars) {
  const size_t count = self.size();
  if (count == 0 || out.size() != count || (!b.empty() && b.size() != count) || (!c.empty() && c.size() != count) ||
      !scalars.fits(count)) {
    return false;
  }
  const at::Tensor& model = self[0];
  for (size_t i = 0; i < count; ++i) {
    if (!dense_on(self[i], model.device()) || self[i].scalar_type() != model.scalar_type() ||
        !dense_like(out[i], self[i]) || (!b.empty() && !dense_like(b[i], self[i])) ||
        (!c.empty() && !dense_like(c[i], self[i]))) {
      return false;
    }
  }
  std::vector<TPD_KernelArg> args{code(op), dtype_of(model), integer(0)};
  args.reserve(3 + 6 * count);
  int64_t launched = 0;
  for (size_t i = 0; i < count; ++i) {
    if (self[i].numel() == 0) {
      continue;  // nothing to write, and its data pointer may be null
    }
    args.insert(args.end(), {pointer(out[i]), pointer(self[i]), pointer(b.empty() ? at::Tensor() : b[i]),
                             pointer(c.empty() ? at::Tensor() : c[i]), integer(self[i].numel()),
                             number(scalars[i])});
    ++launched;
  }
  if (launched > 0) {
    args[2] = integer(launched);
    launch(dk::kForeach, model.device(), args.data(), args.size());
  }
  return true;
}

// New results of self's shapes and types, for the out-of-place variants.
std::vector<at::Tensor> empty_like_each(at::TensorList self) {
  std::vector<at::Tensor> results;
  results.reserve(self.size());
  for (const at::Tensor& tensor : self) {
    results.push_back(at::empty_like(tensor));
  }
  return results;
}

// The kernel of foreach operator `AtenOp` (an at::_ops struct), by its
// signature: the device kernel for `kOp` when it covers the call, else the
// operator's CPU kernel, torch's per-tensor path (each tensor's operator then
// dispatches to its device).
template <typename AtenOp, ForeachOp kOp, typename Schema = typename AtenOp::schema>
struct Foreach;

constexpr c10::DispatchKeySet kPerTensorPath{c10::DispatchKey::CPU};

// In place, by one value, one per tensor or none (add_, mul_, div_, sqrt_).
template <typename AtenOp, ForeachOp kOp, typename... Value>
struct Foreach<AtenOp, kOp, void(at::TensorList, Value...)> {
  static void call(at::TensorList self, Value... value) {
    if (!launch_foreach(kOp, self, self, {}, {}, Scalars(value...))) {
      AtenOp::redispatch(kPerTensorPath, self, value...);
    }
  }
};

// New results (mul.Scalar, sqrt).
template <typename AtenOp, ForeachOp kOp, typename... Value>
struct Foreach<AtenOp, kOp, std::vector<at::Tensor>(at::TensorList, Value...)> {
  static std::vector<at::Tensor> call(at::TensorList self, Value... value) {
    std::vector<at::Tensor> results = empty_like_each(self);
    if (!launch_foreach(kOp, results, self, {}, {}, Scalars(value...))) {
      return AtenOp::redispatch(kPerTensorPath, self, value...);
    }
    return results;
  }
};

// add_.List (alpha) and lerp_.Scalar (weight).
template <typename AtenOp, ForeachOp kOp>
struct Foreach<AtenOp, kOp, void(at::TensorList, at::TensorList, const c10::Scalar&)> {
  static void call(at::TensorList self, at::TensorList other, const c10::Scalar& scalar) {
    if (!launch_foreach(kOp, self, self, other, {}, Scalars(scalar))) {
      AtenOp::redispatch(kPerTensorPath, self, other, scalar);
    }
  }
};

// addcmul_ and addcdiv_, by one value or one per tensor.
template <typename AtenOp, ForeachOp kOp, typename Value>
struct Foreach<AtenOp, kOp, void(at::TensorList, at::TensorList, at::TensorList, Value)> {
  static void call(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2, Value value) {
    if (!launch_foreach(kOp, self, self, tensor1, tensor2, Scalars(value))) {
      AtenOp::redispatch(kPerTensorPath, self, tensor1, tensor2, value);
    }
  }
};

template <typename AtenOp, ForeachOp kOp>
void foreach(DeviceKernels& library) {
  library.impl<AtenOp>(TORCH_FN((&Foreach<AtenOp, kOp>::call)));
}

}  // namespace

void register_foreach_module_kernels(DeviceKernels& library) {
  namespace ops = at::_ops;
  using Op = ForeachOp;
  foreach<ops::_foreach_add__Scalar, Op::kAddScalar>(library);
  foreach<ops::_foreach_add__ScalarList, Op::kAddScalar>(library);
  foreach<ops::_foreach_add__List, Op::kAddScaled>(library);
  foreach<ops::_foreach_mul__Scalar, Op::kMulScalar>(library);
  foreach<ops::_foreach_mul__ScalarList, Op::kMulScalar>(library);
  foreach<ops::_foreach_mul_Scalar, Op::kMulScalar>(library);
  foreach<ops::_foreach_div__Scalar, Op::kDivScalar>(library);
  foreach<ops::_foreach_div__ScalarList, Op::kDivScalar>(library);
  foreach<ops::_foreach_lerp__Scalar, Op::kLerp>(library);
  foreach<ops::_foreach_addcmul__Scalar, Op::kAddcmul>(library);
  foreach<ops::_foreach_addcdiv__Scalar, Op::kAddcdiv>(library);
  foreach<ops::_foreach_addcdiv__ScalarList, Op::kAddcdiv>(library);
  foreach<ops::_foreach_sqrt_, Op::kSqrt>(library);
  foreach<ops::_foreach_sqrt, Op::kSqrt>(library);
}

}  // namespace torchplug
