// The negative log-likelihood loss (cross-entropy's second half) and its gradient.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

constexpr int64_t kReductionNone = 0;
constexpr int64_t kReductionMean = 1;

struct NllShape {
  int64_t rows;
  int64_t classes;
  int64_t reduction;
  int64_t ignore_index;
};

// The class of row `row`, or -1 when it is ignored; fails the kernel on one out of range.
bool target_of(KernelArgs& args, const int64_t* target, int64_t row, const NllShape& shape, int64_t& target_class) {
  target_class = target[row];
  if (target_class == shape.ignore_index) {
    target_class = -1;
    return true;
  }
  if (target_class < 0 || target_class >= shape.classes) {
    args.fail("Target %lld is out of bounds: the input has %lld classes", static_cast<long long>(target_class),
              static_cast<long long>(shape.classes));
    return false;
  }
  return true;
}

// The rest of an nll_loss kernel's arguments after its pointers (rows,
// classes, reduction, ignore_index, dtype): runs `body(Element<T>{}, shape)`.
template <typename Body>
int with_nll_shape(KernelArgs& args, Body&& body) {
  const NllShape shape{args.integer(), args.integer(), args.integer(), args.integer()};
  const int64_t dtype = args.integer();
  if (!args.ok()) {
    return 1;
  }
  return with_dtype(args, dtype, [&](auto element) { return body(element, shape); });
}

}  // namespace
}  // namespace torchplug::device_kernels

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernels below

TORCHPLUG_KERNEL torchplug_nll_loss(const TPD_KernelArg* argv, size_t argc, char* message, size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* out = args.pointer();
  void* total_weight = args.pointer();
  const void* input = args.pointer();
  const auto* target = args.pointer<const int64_t>();
  const void* weight = args.pointer();
  return with_nll_shape(args, [&](auto element, const NllShape& shape) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    using V = typename C::type;
    const auto* x = static_cast<const T*>(input);
    const auto* w = static_cast<const T*>(weight);
    auto* o = static_cast<T*>(out);
    double loss = 0.0;
    double weights = 0.0;
    for (int64_t row = 0; row < shape.rows; ++row) {
      int64_t target_class = -1;
      if (!target_of(args, target, row, shape, target_class)) {
        return 1;
      }
      double value = 0.0;
      if (target_class >= 0) {
        const double class_weight = w != nullptr ? static_cast<double>(C::load(w[target_class])) : 1.0;
        value = -class_weight * static_cast<double>(C::load(x[row * shape.classes + target_class]));
        weights += class_weight;
      }
      if (shape.reduction == kReductionNone) {
        o[row] = C::store(static_cast<V>(value));
      }
      loss += value;
    }
    if (shape.reduction != kReductionNone) {
      o[0] = C::store(static_cast<V>(shape.reduction == kReductionMean ? loss / weights : loss));
    }
    *static_cast<T*>(total_weight) = C::store(static_cast<V>(weights));
    return 0;
  });
}

TORCHPLUG_KERNEL torchplug_nll_loss_backward(const TPD_KernelArg* argv, size_t argc, char* message,
                                             size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* grad_input = args.pointer();
  const void* grad_output = args.pointer();
  const auto* target = args.pointer<const int64_t>();
  const void* weight = args.pointer();
  const void* total_weight = args.pointer();
  return with_nll_shape(args, [&](auto element, const NllShape& shape) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    using V = typename C::type;
    const auto* g = static_cast<const T*>(grad_output);
    const auto* w = static_cast<const T*>(weight);
    auto* d = static_cast<T*>(grad_input);
    const V scale = shape.reduction == kReductionMean ? V(1) / C::load(*static_cast<const T*>(total_weight)) : V(1);
    for (int64_t i = 0; i < shape.rows * shape.classes; ++i) {
      d[i] = C::store(V(0));
    }
    for (int64_t row = 0; row < shape.rows; ++row) {
      int64_t target_class = -1;
      if (!target_of(args, target, row, shape, target_class)) {
        return 1;
      }
      if (target_class < 0) {
        continue;
      }
      const V class_weight = w != nullptr ? C::load(w[target_class]) : V(1);
      const V upstream = C::load(g[shape.reduction == kReductionNone ? row : 0]);
      d[row * shape.classes + target_class] = C::store(-class_weight * upstream * scale);
    }
    return 0;
  });
}
