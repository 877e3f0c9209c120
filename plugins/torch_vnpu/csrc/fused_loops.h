#pragma once
// The npu vendor kernels proper: one pass over contiguous buffers per op,
// with no intermediate tensors. Simulated device memory is host memory, so
// the same loops serve the CPU and the npu registrations.
#include <cstdint>

namespace torch_vnpu {

// y = x * sigmoid(1.702 x), the sigmoid approximation of GELU.
template <typename T>
void fast_gelu_loop(const T* x, T* y, int64_t numel);

template <typename T>
void fast_gelu_backward_loop(const T* grad, const T* x, T* grad_x, int64_t numel);

// Each of `rows` rows of `cols` elements: y = x / sqrt(mean(x^2) + eps) * weight.
template <typename T>
void rms_norm_loop(const T* x, const T* weight, T* y, int64_t rows, int64_t cols, double eps);

template <typename T>
void rms_norm_backward_loop(const T* grad, const T* x, const T* weight, T* grad_x, T* grad_weight,
                            int64_t rows, int64_t cols, double eps);

}  // namespace torch_vnpu
