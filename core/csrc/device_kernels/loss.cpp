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

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_nll_loss) {
  const auto [out, total_weight, input, target, weight, rows, classes, reduction, ignore_index, dtype] =
      args.read<void*, void*, const void*, const int64_t*, const void*, int64_t, int64_t, int64_t, int64_t, int64_t>();
  const NllShape shape{rows, classes, reduction, ignore_index};
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    const auto* x = E::at(input);
    const auto* w = E::at(weight);
    double loss = 0.0;
    double weights = 0.0;
    for (int64_t row = 0; row < shape.rows; ++row) {
      int64_t target_class = -1;
      if (!target_of(args, target, row, shape, target_class)) {
        return 1;
      }
      double value = 0.0;
      if (target_class >= 0) {
        const double class_weight = w != nullptr ? static_cast<double>(E::load(w[target_class])) : 1.0;
        value = -class_weight * static_cast<double>(E::load(x[row * shape.classes + target_class]));
        weights += class_weight;
      }
      if (shape.reduction == kReductionNone) {
        E::at(out)[row] = E::store(static_cast<typename E::value>(value));
      }
      loss += value;
    }
    if (shape.reduction != kReductionNone) {
      const double reduced = shape.reduction == kReductionMean ? loss / weights : loss;
      E::at(out)[0] = E::store(static_cast<typename E::value>(reduced));
    }
    *E::at(total_weight) = E::store(static_cast<typename E::value>(weights));
    return 0;
  });
}

TORCHPLUG_DEVICE_KERNEL(torchplug_nll_loss_backward) {
  const auto [grad_input, grad_output, target, weight, total_weight, rows, classes, reduction, ignore_index, dtype] =
      args.read<void*, const void*, const int64_t*, const void*, const void*, int64_t, int64_t, int64_t, int64_t,
                int64_t>();
  const NllShape shape{rows, classes, reduction, ignore_index};
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    using V = typename E::value;
    const auto* w = E::at(weight);
    auto* d = E::at(grad_input);
    const V scale = shape.reduction == kReductionMean ? V(1) / E::load(*E::at(total_weight)) : V(1);
    for (int64_t i = 0; i < shape.rows * shape.classes; ++i) {
      d[i] = E::store(V(0));
    }
    for (int64_t row = 0; row < shape.rows; ++row) {
      int64_t target_class = -1;
      if (!target_of(args, target, row, shape, target_class)) {
        return 1;
      }
      if (target_class < 0) {
        continue;
      }
      const V class_weight = w != nullptr ? E::load(w[target_class]) : V(1);
      const V upstream = E::load(E::at(grad_output)[shape.reduction == kReductionNone ? row : 0]);
      d[row * shape.classes + target_class] = E::store(-class_weight * upstream * scale);
    }
    return 0;
  });
}

}  // namespace torchplug::device_kernels
