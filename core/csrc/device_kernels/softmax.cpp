// Softmax and log-softmax over the last dimension, and their gradients.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

template <typename E>
void softmax_rows(void* out, const void* in, int64_t rows, int64_t columns, SoftmaxMode mode) {
  using V = typename E::value;
  const bool log = mode == SoftmaxMode::kLogSoftmax;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* x = E::at(in) + r * columns;
    auto* y = E::at(out) + r * columns;
    V largest = -INFINITY;
    for (int64_t j = 0; j < columns; ++j) {
      const V value = E::load(x[j]);
      largest = value > largest || std::isnan(value) ? value : largest;
    }
    if (mode == SoftmaxMode::kSafe && largest == -INFINITY) {  // every element masked out
      for (int64_t j = 0; j < columns; ++j) {
        y[j] = E::store(V(0));
      }
      continue;
    }
    V total = V(0);
    for (int64_t j = 0; j < columns; ++j) {
      total += std::exp(E::load(x[j]) - largest);
    }
    if (log) {
      const V shift = largest + std::log(total);
      for (int64_t j = 0; j < columns; ++j) {
        y[j] = E::store(E::load(x[j]) - shift);
      }
    } else {
      for (int64_t j = 0; j < columns; ++j) {
        y[j] = E::store(std::exp(E::load(x[j]) - largest) / total);
      }
    }
  }
}

// The gradient from the forward's output.
template <typename E>
void softmax_backward_rows(void* grad_in, const void* grad_out, const void* output, int64_t rows, int64_t columns,
                           bool log) {
  using V = typename E::value;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* g = E::at(grad_out) + r * columns;
    const auto* y = E::at(output) + r * columns;
    auto* d = E::at(grad_in) + r * columns;
    V total = V(0);
    for (int64_t j = 0; j < columns; ++j) {
      total += log ? E::load(g[j]) : E::load(g[j]) * E::load(y[j]);
    }
    for (int64_t j = 0; j < columns; ++j) {
      const V grad = E::load(g[j]);
      d[j] = E::store(log ? grad - std::exp(E::load(y[j])) * total : E::load(y[j]) * (grad - total));
    }
  }
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_softmax) {
  const auto [out, in, rows, columns, dtype, mode] =
      args.read<void*, const void*, int64_t, int64_t, int64_t, int64_t>();
  if (args.ok() && (mode < 0 || mode > static_cast<int64_t>(SoftmaxMode::kSafe))) {
    return args.fail("has no mode %lld", static_cast<long long>(mode));
  }
  return with_dtype(args, dtype, [&](auto element) {
    softmax_rows<decltype(element)>(out, in, rows, columns, static_cast<SoftmaxMode>(mode));
    return 0;
  });
}

TORCHPLUG_DEVICE_KERNEL(torchplug_softmax_backward) {
  const auto [grad_in, grad_out, output, rows, columns, dtype, log] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, int64_t>();
  return with_dtype(args, dtype, [&](auto element) {
    softmax_backward_rows<decltype(element)>(grad_in, grad_out, output, rows, columns, log != 0);
    return 0;
  });
}

}  // namespace torchplug::device_kernels
