// The optimizers' foreach steps on a device whose memory is host memory: one
// call queues one kernel over the whole tensor list, and that kernel runs the
// CPU's per-tensor path on the stream's worker (each tensor's operator a
// device kernel, run there inline). A training step's optimizer update is then
// a handful of launches instead of one per parameter and operator, as CUDA's
// fused foreach kernels are one launch each; every tensor is still computed
// by the CPU's own kernel, so results match the CPU's bit for bit.
//
// A call this does not cover (tensors of several devices, shapes or element
// types that differ between the lists, a symbolic number) or that runs at
// once (launches blocking, a small call on an idle stream) takes torch's
// per-tensor path on the launching thread, which raises torch's own errors.
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include <ATen/ScalarOps.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_addcdiv_ops.h>
#include <ATen/ops/_foreach_addcmul_ops.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_lerp_ops.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_sqrt_ops.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sqrt.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>

#include "launch/kernel_launch.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

constexpr c10::DispatchKeySet kPerTensorLoop{c10::DispatchKey::CPU};

// Whether one call of a foreach operator can be queued as one kernel: its
// tensors all on one device whose memory the CPU's loops run over, each
// list's i-th tensor of the first list's i-th shape and element type, each
// list of numbers one per tensor, and no number symbolic.
class Coverage {
 public:
  explicit Coverage(at::TensorList self) : self_(self) {
    covered_ = !self.empty() && self[0].defined() && !self[0].device().is_cpu();
    if (covered_) {
      device_ = self[0].device();
      covered_ = runs_over_device_memory(device_);
    }
  }

  template <typename T>
  void note(const T& argument) {
    if constexpr (std::is_same_v<T, at::TensorList>) {
      covered_ = covered_ && argument.size() == self_.size();
      for (size_t i = 0; covered_ && i < argument.size(); ++i) {
        const at::Tensor& tensor = argument[i];
        covered_ = tensor.defined() && tensor.device() == device_ && tensor.layout() == c10::kStrided &&
                   tensor.has_storage() && tensor.sizes() == self_[i].sizes() &&
                   tensor.scalar_type() == self_[i].scalar_type();
        work_ += tensor.numel();
      }
    } else if constexpr (std::is_same_v<T, c10::ArrayRef<c10::Scalar>>) {
      covered_ = covered_ && argument.size() == self_.size();
      for (const c10::Scalar& number : argument) {
        covered_ = covered_ && !number.isSymbolic();
      }
    } else if constexpr (std::is_same_v<T, c10::Scalar>) {
      covered_ = covered_ && !argument.isSymbolic();
    }
  }

  // New results are the first list's shapes and types: only for floating lists,
  // whose results (a square root, a product with a number) keep their type.
  void needs_floating_results() {
    for (size_t i = 0; covered_ && i < self_.size(); ++i) {
      covered_ = at::isFloatingType(self_[i].scalar_type());
    }
  }

  bool queued() const { return covered_ && queues_kernel(device_, work_); }
  c10::Device device() const { return device_; }

 private:
  at::TensorList self_;
  c10::Device device_{c10::kCPU};
  bool covered_ = false;
  int64_t work_ = 0;
};

// What the queued kernel keeps of an argument: unowned views of a list's
// tensors, a copy of a list of numbers, and the rest as it is.
template <typename T>
auto kept_argument(QueuedViews& views, const T& argument) {
  if constexpr (std::is_same_v<T, at::TensorList>) {
    std::vector<at::Tensor> kept;
    kept.reserve(argument.size());
    for (const at::Tensor& tensor : argument) {
      kept.push_back(views.view(tensor));
    }
    return kept;
  } else if constexpr (std::is_same_v<T, c10::ArrayRef<c10::Scalar>>) {
    return argument.vec();
  } else {
    return argument;
  }
}

// A kept argument handed to the operator as the type its schema names.
template <typename T>
const T& as_argument(const T& kept) {
  return kept;
}
inline at::TensorList as_argument(const std::vector<at::Tensor>& kept) { return kept; }
inline c10::ArrayRef<c10::Scalar> as_argument(const std::vector<c10::Scalar>& kept) { return kept; }

template <typename AtenOp, typename Schema = typename AtenOp::schema>
struct QueuedForeach;

// In place (add_, mul_, div_, lerp_, addcmul_, addcdiv_, sqrt_): the kernel
// allocates nothing.
template <typename AtenOp, typename... Args>
struct QueuedForeach<AtenOp, void(at::TensorList, Args...)> {
  static void call(at::TensorList self, Args... args) {
    Coverage coverage(self);
    coverage.note(self);
    (coverage.note(args), ...);
    if (!coverage.queued()) {
      AtenOp::redispatch(kPerTensorLoop, self, args...);
      return;
    }
    QueuedViews views;
    auto kept = std::make_tuple(kept_argument(views, self), kept_argument(views, args)...);
    enqueue_kernel(
        AtenOp::name, coverage.device(),
        [kept = std::move(kept)] {
          std::apply([](const auto&... each) { AtenOp::redispatch(kPerTensorLoop, as_argument(each)...); }, kept);
        },
        ActivityKind::kKernel);
  }
};

// New results (sqrt, mul.Scalar), allocated at the launch and computed into
// by `Into`, each tensor's out= operator (one pass over its memory, where a
// copy then the in-place operator would be two): the kernel allocates
// nothing. (Memory it allocated on the stream's worker could be memory the
// program freed after the launch, which kernels queued before the free, and
// after this one, still read.) The out= operators are the kernels the CPU's
// per-tensor path runs for each result, so the values are the CPU's.
template <typename AtenOp, typename Into, typename Schema = typename AtenOp::schema>
struct QueuedForeachResults;

template <typename AtenOp, typename Into, typename... Args>
struct QueuedForeachResults<AtenOp, Into, std::vector<at::Tensor>(at::TensorList, Args...)> {
  static std::vector<at::Tensor> call(at::TensorList self, Args... args) {
    Coverage coverage(self);
    coverage.note(self);
    (coverage.note(args), ...);
    coverage.needs_floating_results();
    if (!coverage.queued()) {
      return AtenOp::redispatch(kPerTensorLoop, self, args...);
    }
    std::vector<at::Tensor> results;
    results.reserve(self.size());
    for (const at::Tensor& tensor : self) {
      results.push_back(at::empty_like(tensor));
    }
    QueuedViews views;
    enqueue_kernel(
        AtenOp::name, coverage.device(),
        [filled = kept_argument(views, at::TensorList(results)), sources = kept_argument(views, self),
         kept = std::make_tuple(kept_argument(views, args)...)]() mutable {
          for (size_t i = 0; i < filled.size(); ++i) {
            std::apply([&](const auto&... each) { Into::into(filled[i], sources[i], each...); }, kept);
          }
        },
        ActivityKind::kKernel);
    return results;
  }
};

// What the CPU's per-tensor path computes for one result of _foreach_sqrt
// (`tensor.sqrt()`) and of _foreach_mul.Scalar (`tensor.mul(number)`), into `out`.
struct SqrtInto {
  static void into(at::Tensor& out, const at::Tensor& self) { at::sqrt_out(out, self); }
};
struct MulScalarInto {
  static void into(at::Tensor& out, const at::Tensor& self, const c10::Scalar& number) {
    at::mul_out(out, self, at::native::wrapped_scalar_tensor(number));
  }
};

template <typename AtenOp, typename Into>
void queued_foreach_results(DeviceKernels& library) {
  library.impl<AtenOp>(TORCH_FN((&QueuedForeachResults<AtenOp, Into>::call)));
}

template <typename AtenOp>
void queued_foreach(DeviceKernels& library) {
  library.impl<AtenOp>(TORCH_FN((&QueuedForeach<AtenOp>::call)));
}

}  // namespace

void register_queued_foreach_kernels(DeviceKernels& library) {
  namespace ops = at::_ops;
  queued_foreach<ops::_foreach_add__Scalar>(library);
  queued_foreach<ops::_foreach_add__ScalarList>(library);
  queued_foreach<ops::_foreach_add__List>(library);
  queued_foreach<ops::_foreach_mul__Scalar>(library);
  queued_foreach<ops::_foreach_mul__ScalarList>(library);
  queued_foreach_results<ops::_foreach_mul_Scalar, MulScalarInto>(library);
  queued_foreach<ops::_foreach_div__Scalar>(library);
  queued_foreach<ops::_foreach_div__ScalarList>(library);
  queued_foreach<ops::_foreach_lerp__Scalar>(library);
  queued_foreach<ops::_foreach_addcmul__Scalar>(library);
  queued_foreach<ops::_foreach_addcmul__ScalarList>(library);
  queued_foreach<ops::_foreach_addcdiv__Scalar>(library);
  queued_foreach<ops::_foreach_addcdiv__ScalarList>(library);
  queued_foreach<ops::_foreach_sqrt_>(library);
  queued_foreach_results<ops::_foreach_sqrt, SqrtInto>(library);
}

}  // namespace torchplug
