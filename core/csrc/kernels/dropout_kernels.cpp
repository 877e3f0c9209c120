// Dropout on a device whose memory the host cannot address. The mask is drawn
// on the host from the device generator's engine, by the call the CPU's
// native_dropout makes (so a seeded run drops what the CPU's drops), and only
// the mask crosses to the device; the device kernels (device_kernels/dropout.cpp)
// apply it there, forward and backward. Any other call takes the copying fallback.
#include <optional>
#include <tuple>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_dropout_backward_ops.h>
#include <ATen/ops/native_dropout_ops.h>

#include "device/generator.h"
#include "kernels/cpu_fallback.h"
#include "kernels/device_kernel_calls.h"
#include "memory/host_mirror.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

// `in` where `mask` keeps it, times `scale`; zero elsewhere (see kernel_abi.h).
at::Tensor apply_mask(const at::Tensor& in, const at::Tensor& mask, double scale, bool round_scale) {
  at::Tensor out = at::empty(in.sizes(), in.options());
  if (in.numel() > 0) {
    launch(dk::kDropout, in.device(),
           {pointer(out), pointer(in), pointer(mask), integer(in.numel()), dtype_of(in), number(scale),
            integer(round_scale ? 1 : 0)});
  }
  return out;
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if ((!train.has_value() || *train) && dense_on(input, input.device()) && input.numel() > 0) {
    const double keep_probability = 1.0 - p;
    at::Tensor keep = at::empty(input.sizes(), input.options().device(c10::kCPU));
    keep.bernoulli_(keep_probability, engine_of(default_generator(input.device())));
    at::Tensor mask = upload_to_device(keep.to(c10::kBool), input.device());
    const double scale = keep_probability == 0.0 ? 0.0 : 1.0 / keep_probability;
    return {apply_mask(input, mask, scale, /*round_scale=*/true), mask};
  }
  return call_through_fallback<at::_ops::native_dropout>(fallback_keys(input), input, p, train);
}

at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask, double scale) {
  if (dense_on(grad_output, grad_output.device()) && mask.device() == grad_output.device() &&
      mask.scalar_type() == c10::kBool && mask.is_contiguous() && mask.sizes() == grad_output.sizes()) {
    return apply_mask(grad_output, mask, scale, /*round_scale=*/false);
  }
  return call_through_fallback<at::_ops::native_dropout_backward>(fallback_keys(grad_output, mask), grad_output,
                                                                  mask, scale);
}

}  // namespace

void register_dropout_module_kernels(DeviceKernels& library) {
  library.impl("native_dropout", TORCH_FN(native_dropout));
  library.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
}

}  // namespace torchplug
