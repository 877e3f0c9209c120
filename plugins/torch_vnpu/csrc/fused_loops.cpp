#include "fused_loops.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

namespace torch_vnpu {
namespace {

constexpr double kFastGeluScale = 1.702;
constexpr int64_t kElementGrain = 1 << 15;

// Elementwise math runs in float for the narrow types, as on real hardware;
// row reductions always accumulate in double.
template <typename T>
using ElementMath = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename Acc>
Acc sigmoid_of_scaled(Acc x) {
  return Acc(1) / (Acc(1) + std::exp(-static_cast<Acc>(kFastGeluScale) * x));
}

int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(cols, 1));
}

}  // namespace

template <typename T>
void fast_gelu_loop(const T* x, T* y, int64_t numel) {
  using Acc = ElementMath<T>;
  torch::stable::parallel_for(0, numel, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Acc value = static_cast<Acc>(x[i]);
      y[i] = static_cast<T>(value * sigmoid_of_scaled(value));
    }
  });
}

template <typename T>
void fast_gelu_backward_loop(const T* grad, const T* x, T* grad_x, int64_t numel) {
  using Acc = ElementMath<T>;
  const Acc scale = static_cast<Acc>(kFastGeluScale);
  torch::stable::parallel_for(0, numel, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Acc value = static_cast<Acc>(x[i]);
      const Acc s = sigmoid_of_scaled(value);
      const Acc derivative = s + scale * value * s * (Acc(1) - s);
      grad_x[i] = static_cast<T>(static_cast<Acc>(grad[i]) * derivative);
    }
  });
}

template <typename T>
void rms_norm_loop(const T* x, const T* weight, T* y, int64_t rows, int64_t cols, double eps) {
  torch::stable::parallel_for(0, rows, row_grain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T* in = x + row * cols;
      T* out = y + row * cols;
      double sum_of_squares = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double value = static_cast<double>(in[j]);
        sum_of_squares += value * value;
      }
      const double rstd = 1.0 / std::sqrt(sum_of_squares / static_cast<double>(cols) + eps);
      for (int64_t j = 0; j < cols; ++j) {
        out[j] = static_cast<T>(static_cast<double>(in[j]) * rstd * static_cast<double>(weight[j]));
      }
    }
  });
}

template <typename T>
void rms_norm_backward_loop(const T* grad, const T* x, const T* weight, T* grad_x, T* grad_weight,
                            int64_t rows, int64_t cols, double eps) {
  std::vector<double> rstd(static_cast<size_t>(rows));
  // y_j = x_j r w_j with r = (mean(x^2) + eps)^-1/2, so
  // dL/dx_j = r g_j w_j - x_j r^3 mean_k(g_k w_k x_k).
  torch::stable::parallel_for(0, rows, row_grain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T* in = x + row * cols;
      const T* g = grad + row * cols;
      double sum_of_squares = 0;
      double projection = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double value = static_cast<double>(in[j]);
        sum_of_squares += value * value;
        projection += static_cast<double>(g[j]) * static_cast<double>(weight[j]) * value;
      }
      const double r = 1.0 / std::sqrt(sum_of_squares / static_cast<double>(cols) + eps);
      rstd[static_cast<size_t>(row)] = r;
      const double correction = r * r * r * projection / static_cast<double>(cols);
      T* out = grad_x + row * cols;
      for (int64_t j = 0; j < cols; ++j) {
        out[j] = static_cast<T>(r * static_cast<double>(g[j]) * static_cast<double>(weight[j]) -
                                static_cast<double>(in[j]) * correction);
      }
    }
  });
  // dL/dw_j = sum over rows of g_j x_j r, one column per task.
  torch::stable::parallel_for(0, cols, row_grain(rows), [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      double total = 0;
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t at = row * cols + j;
        total += static_cast<double>(grad[at]) * static_cast<double>(x[at]) * rstd[static_cast<size_t>(row)];
      }
      grad_weight[j] = static_cast<T>(total);
    }
  });
}

#define TORCH_VNPU_INSTANTIATE(T)                                                              \
  template void fast_gelu_loop<T>(const T*, T*, int64_t);                                      \
  template void fast_gelu_backward_loop<T>(const T*, const T*, T*, int64_t);                   \
  template void rms_norm_loop<T>(const T*, const T*, T*, int64_t, int64_t, double);            \
  template void rms_norm_backward_loop<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, \
                                          double);

TORCH_VNPU_INSTANTIATE(float)
TORCH_VNPU_INSTANTIATE(double)
TORCH_VNPU_INSTANTIATE(torch::headeronly::Half)
TORCH_VNPU_INSTANTIATE(torch::headeronly::BFloat16)

#undef TORCH_VNPU_INSTANTIATE

}  // namespace torch_vnpu
