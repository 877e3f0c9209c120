// Layer normalisation on a device whose memory the host cannot address: the
// forward and its gradients as device kernels (device_kernels/layer_norm.cpp)
// for an input of a type the kernels take, with weight and bias of that type
// or none; any other call takes the copying fallback. A strided input (a
// channels-last image permuted to normalise its channels) is read through a
// contiguous copy made inside the device, as the CPU's kernel reads one; the
// results are contiguous on both.
#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <c10/core/SymIntArrayRef.h>

#include "kernels/cpu_fallback.h"
#include "kernels/device_copy.h"
#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

// The rows and columns native_layer_norm sees `input` as, when the kernels
// cover it: the normalised shape is the input's last dimensions, and weight
// and bias, where given, are dense of that shape and the input's type.
std::optional<std::array<int64_t, 2>> layer_norm_extent(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                                                        const at::Tensor& weight, const at::Tensor& bias) {
  const auto shape = c10::asIntArrayRefSlowOpt(normalized_shape);
  if (!shape || !dense_on(input, input.device()) || shape->empty() ||
      static_cast<int64_t>(shape->size()) > input.dim()) {
    return std::nullopt;
  }
  const int64_t axis = input.dim() - static_cast<int64_t>(shape->size());
  if (input.sizes().slice(axis) != *shape) {
    return std::nullopt;
  }
  for (const at::Tensor* parameter : {&weight, &bias}) {
    if (parameter->defined() && (!dense_on(*parameter, input.device()) ||
                                 parameter->scalar_type() != input.scalar_type() || parameter->sizes() != *shape)) {
      return std::nullopt;
    }
  }
  int64_t columns = 1;
  for (const int64_t size : *shape) {
    columns *= size;
  }
  if (columns == 0) {
    return std::nullopt;
  }
  return std::array<int64_t, 2>{input.numel() / columns, columns};
}

// The shape of mean and rstd: the input's leading dimensions, then ones.
std::vector<int64_t> statistics_shape(const at::Tensor& input, int64_t normalized_dims) {
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  std::fill(shape.end() - normalized_dims, shape.end(), 1);
  return shape;
}

// `tensor`, contiguous, when the kernels take its type.
at::Tensor dense_operand(const at::Tensor& tensor) {
  return kernel_dtype(tensor.scalar_type()).has_value() ? contiguous_inside_device(tensor) : tensor;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& strided_input,
                                                          c10::SymIntArrayRef normalized_shape,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias, double eps) {
  const at::Tensor input = dense_operand(strided_input);
  const at::Tensor w = defined_or_none(weight);
  const at::Tensor b = defined_or_none(bias);
  if (const auto extent = layer_norm_extent(input, normalized_shape, w, b)) {
    const auto [rows, columns] = *extent;
    at::Tensor out = at::empty(input.sizes(), input.options());
    const auto statistics = statistics_shape(input, static_cast<int64_t>(normalized_shape.size()));
    at::Tensor mean = at::empty(statistics, input.options());
    at::Tensor rstd = at::empty(statistics, input.options());
    if (rows > 0) {
      launch(dk::kLayerNorm, input.device(),
             {pointer(out), pointer(mean), pointer(rstd), pointer(input), pointer(w), pointer(b), integer(rows),
              integer(columns), number(eps), dtype_of(input)});
    }
    return {std::move(out), std::move(mean), std::move(rstd)};
  }
  return call_through_fallback<at::_ops::native_layer_norm>(fallback_keys(input), input, normalized_shape, weight,
                                                            bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& strided_grad_out, const at::Tensor& strided_input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  const at::Tensor grad_out = dense_operand(strided_grad_out);
  const at::Tensor input = dense_operand(strided_input);
  const at::Tensor w = defined_or_none(weight);
  const at::Tensor b = defined_or_none(bias);
  const auto extent = layer_norm_extent(input, normalized_shape, w, b);
  const auto statistics_fit = [&](const at::Tensor& statistic) {
    return dense_on(statistic, input.device()) && statistic.scalar_type() == input.scalar_type() &&
           extent && statistic.numel() == (*extent)[0];
  };
  // A parameter's gradient is asked for only where the parameter is given.
  if (extent && dense_like(grad_out, input) && statistics_fit(mean) && statistics_fit(rstd) &&
      (!output_mask[1] || w.defined()) && (!output_mask[2] || b.defined())) {
    const auto [rows, columns] = *extent;
    at::Tensor grad_input = output_mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
    at::Tensor grad_weight = output_mask[1] ? at::empty(w.sizes(), w.options()) : at::Tensor();
    at::Tensor grad_bias = output_mask[2] ? at::empty(b.sizes(), b.options()) : at::Tensor();
    if (rows > 0) {
      launch(dk::kLayerNormBackward, input.device(),
             {pointer(grad_input), pointer(grad_weight), pointer(grad_bias), pointer(grad_out), pointer(input),
              pointer(mean), pointer(rstd), pointer(w), integer(rows), integer(columns), dtype_of(input)});
    } else {
      // No rows: the parameters' gradients are sums over nothing.
      for (at::Tensor* gradient : {&grad_weight, &grad_bias}) {
        if (gradient->defined()) {
          gradient->zero_();
        }
      }
    }
    return {std::move(grad_input), std::move(grad_weight), std::move(grad_bias)};
  }
  return call_through_fallback<at::_ops::native_layer_norm_backward>(fallback_keys(grad_out, input), grad_out, input,
                                                                     normalized_shape, mean, rstd, weight, bias,
                                                                     output_mask);
}

}  // namespace

void register_normalization_module_kernels(DeviceKernels& library) {
  library.impl("native_layer_norm", TORCH_FN(layer_norm));
  library.impl("native_layer_norm_backward", TORCH_FN(layer_norm_backward));
}

}  // namespace torchplug
