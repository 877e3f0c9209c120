// Layer normalisation over each row's last `columns` elements, and its
// gradients, with the CPU's formulas (kernel_abi.h): statistics accumulated in
// double, so that float32 rows of any length keep the CPU's digits.
#include <cmath>
#include <cstdint>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

template <typename E>
void layer_norm_rows(void* out, void* mean, void* rstd, const void* input, const void* weight, const void* bias,
                     int64_t rows, int64_t columns, double eps) {
  using V = typename E::value;
  const auto* w = E::at(weight);
  const auto* b = E::at(bias);
  for (int64_t r = 0; r < rows; ++r) {
    const auto* x = E::at(input) + r * columns;
    auto* y = E::at(out) + r * columns;
    double total = 0.0;
    for (int64_t j = 0; j < columns; ++j) {
      total += static_cast<double>(E::load(x[j]));
    }
    const double row_mean = total / static_cast<double>(columns);
    double squares = 0.0;
    for (int64_t j = 0; j < columns; ++j) {
      const double centred = static_cast<double>(E::load(x[j])) - row_mean;
      squares += centred * centred;
    }
    const double row_rstd = 1.0 / std::sqrt(squares / static_cast<double>(columns) + eps);
    const V m = static_cast<V>(row_mean);
    const V s = static_cast<V>(row_rstd);
    for (int64_t j = 0; j < columns; ++j) {
      V value = (E::load(x[j]) - m) * s;
      if (w != nullptr) {
        value *= E::load(w[j]);
      }
      if (b != nullptr) {
        value += E::load(b[j]);
      }
      y[j] = E::store(value);
    }
    E::at(mean)[r] = E::store(m);
    E::at(rstd)[r] = E::store(s);
  }
}

template <typename E>
void layer_norm_gradients(void* grad_input, void* grad_weight, void* grad_bias, const void* grad_out,
                          const void* input, const void* mean, const void* rstd, const void* weight, int64_t rows,
                          int64_t columns) {
  using V = typename E::value;
  const auto* w = E::at(weight);
  const double n = static_cast<double>(columns);
  if (grad_input != nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      const auto* dy = E::at(grad_out) + r * columns;
      const auto* x = E::at(input) + r * columns;
      auto* dx = E::at(grad_input) + r * columns;
      const double m = static_cast<double>(E::load(E::at(mean)[r]));
      const double s = static_cast<double>(E::load(E::at(rstd)[r]));
      // With g = dy * w: dx = s * g + b * x + c, b and c from the row's sums of g * x and g.
      double sum_gx = 0.0;
      double sum_g = 0.0;
      for (int64_t j = 0; j < columns; ++j) {
        const double g = static_cast<double>(E::load(dy[j])) * (w != nullptr ? static_cast<double>(E::load(w[j])) : 1.0);
        sum_gx += g * static_cast<double>(E::load(x[j]));
        sum_g += g;
      }
      const double b = (sum_g * m - sum_gx) * s * s * s / n;
      const double c = -b * m - sum_g * s / n;
      for (int64_t j = 0; j < columns; ++j) {
        const double g = static_cast<double>(E::load(dy[j])) * (w != nullptr ? static_cast<double>(E::load(w[j])) : 1.0);
        dx[j] = E::store(static_cast<V>(s * g + b * static_cast<double>(E::load(x[j])) + c));
      }
    }
  }
  if (grad_weight == nullptr && grad_bias == nullptr) {
    return;
  }
  // Column sums over the rows, each in double.
  for (int64_t j = 0; j < columns; ++j) {
    double weight_sum = 0.0;
    double bias_sum = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const double dy = static_cast<double>(E::load(E::at(grad_out)[r * columns + j]));
      const double x = static_cast<double>(E::load(E::at(input)[r * columns + j]));
      weight_sum += dy * (x - static_cast<double>(E::load(E::at(mean)[r]))) *
                    static_cast<double>(E::load(E::at(rstd)[r]));
      bias_sum += dy;
    }
    if (grad_weight != nullptr) {
      E::at(grad_weight)[j] = E::store(static_cast<V>(weight_sum));
    }
    if (grad_bias != nullptr) {
      E::at(grad_bias)[j] = E::store(static_cast<V>(bias_sum));
    }
  }
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_layer_norm) {
  const auto [out, mean, rstd, input, weight, bias, rows, columns, eps, dtype] =
      args.read<void*, void*, void*, const void*, const void*, const void*, int64_t, int64_t, double, int64_t>();
  if (args.ok() && (rows < 0 || columns < 1)) {
    return args.fail("takes rows of at least one element (rows=%lld, columns=%lld)", static_cast<long long>(rows),
                     static_cast<long long>(columns));
  }
  return with_dtype(args, dtype, [&](auto element) {
    layer_norm_rows<decltype(element)>(out, mean, rstd, input, weight, bias, rows, columns, eps);
    return 0;
  });
}

TORCHPLUG_DEVICE_KERNEL(torchplug_layer_norm_backward) {
  const auto [grad_input, grad_weight, grad_bias, grad_out, input, mean, rstd, weight, rows, columns, dtype] =
      args.read<void*, void*, void*, const void*, const void*, const void*, const void*, const void*, int64_t,
                int64_t, int64_t>();
  if (args.ok() && (rows < 0 || columns < 1)) {
    return args.fail("takes rows of at least one element (rows=%lld, columns=%lld)", static_cast<long long>(rows),
                     static_cast<long long>(columns));
  }
  return with_dtype(args, dtype, [&](auto element) {
    layer_norm_gradients<decltype(element)>(grad_input, grad_weight, grad_bias, grad_out, input, mean, rstd, weight,
                                            rows, columns);
    return 0;
  });
}

}  // namespace torchplug::device_kernels
