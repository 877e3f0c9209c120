// Unboxed kernels for hot functional operators: the CPU kernel runs over host
// aliases of the device tensors, called directly rather than through the
// boxed fallback, and its output is taken over as device memory. Same
// semantics as the fallback, without boxing and without the second
// TensorIterator a composite functional-from-out= kernel would build.
#include <array>
#include <tuple>
#include <utility>

#include <ATen/core/Tensor.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/convolution_backward_ops.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/backend.h"
#include "aten/device_activity.h"
#include "aten/host_alias.h"
#include "runtime/memory_guard.h"

namespace torchplug {
namespace {

struct HostCall {
  std::optional<c10::Device> device;
  bool host_tensor_seen = false;
  std::vector<const void*> accessed;  // strict mode only

  at::Tensor alias(const at::Tensor& tensor) {
    if (!tensor.defined()) {
      return tensor;
    }
    const c10::Device tensor_device = tensor.device();
    if (tensor_device.is_cpu()) {
      host_tensor_seen = host_tensor_seen || tensor.dim() > 0;
      return tensor;
    }
    if (!device.has_value()) {
      device = tensor_device;
    } else if (*device != tensor_device) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
                  *device, " and ", tensor_device, "!");
    }
    if (runtime::strict_mode()) {
      accessed.push_back(tensor.storage().data());
    }
    return host_alias(tensor);
  }

  template <typename T>
  decltype(auto) convert(T&& value) {
    if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) {
      return alias(value);
    } else if constexpr (std::is_same_v<std::decay_t<T>, std::optional<at::Tensor>>) {
      return value.has_value() ? std::optional<at::Tensor>(alias(*value)) : std::optional<at::Tensor>();
    } else {
      return std::forward<T>(value);
    }
  }
};

// Converts the arguments, runs `Op`'s CPU kernel on them and hands back its
// raw CPU result together with the device the call runs on.
template <typename Op, typename... Args>
auto run_on_host(c10::Device& device, Args&&... args) {
  HostCall host;
  auto host_args = std::tuple<decltype(host.convert(std::forward<Args>(args)))...>{
      host.convert(std::forward<Args>(args))...};
  TORCH_CHECK(host.device.has_value(), Op::name, " reached a simulated device without a device tensor.");
  if (host.host_tensor_seen) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
                *host.device, " and cpu!");
  }
  device = *host.device;
  c10::DeviceGuard guard(device);
  wait_for_current_stream(device);
  runtime::KernelAccess access(host.accessed);
  DeviceActivity activity(Op::name, device);
  return std::apply(
      [](auto&&... converted) { return Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), converted...); },
      host_args);
}

template <typename Op, typename Schema = typename Op::schema>
struct OnHost;

template <typename Op, typename... Args>
struct OnHost<Op, at::Tensor(Args...)> {
  static at::Tensor call(Args... args) {
    c10::Device device(c10::kCPU);
    at::Tensor result = run_on_host<Op>(device, std::forward<Args>(args)...);
    return adopt_host_tensor(result, device);
  }
};

template <typename Op, typename... Args>
struct OnHost<Op, std::tuple<at::Tensor, at::Tensor, at::Tensor>(Args...)> {
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> call(Args... args) {
    c10::Device device(c10::kCPU);
    auto [a, b, c] = run_on_host<Op>(device, std::forward<Args>(args)...);
    auto adopt = [&](const at::Tensor& t) { return t.defined() ? adopt_host_tensor(t, device) : t; };
    return {adopt(a), adopt(b), adopt(c)};
  }
};

// Convolutions on devices other than CPU and CUDA reach the "overrideable"
// entry points; they are the CPU convolutions over host aliases.
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  std::optional<c10::SymIntArrayRef> bias_sizes;
  const std::array<c10::SymInt, 1> bias_size{weight.sym_size(transposed ? 1 : 0) * (transposed ? groups : 1)};
  if (output_mask[2]) {
    bias_sizes = c10::SymIntArrayRef(bias_size);
  }
  return OnHost<at::_ops::convolution_backward>::call(grad_output, input, weight, bias_sizes, stride, padding,
                                                      dilation, transposed, output_padding, groups, output_mask);
}

#define TORCHPLUG_ON_HOST(library, schema_name, op) library.impl(schema_name, TORCH_FN((&OnHost<at::_ops::op>::call)))

}  // namespace

void register_host_kernels(torch::Library& library) {
  TORCHPLUG_ON_HOST(library, "add.Tensor", add_Tensor);
  TORCHPLUG_ON_HOST(library, "sub.Tensor", sub_Tensor);
  TORCHPLUG_ON_HOST(library, "mul.Tensor", mul_Tensor);
  TORCHPLUG_ON_HOST(library, "div.Tensor", div_Tensor);
  TORCHPLUG_ON_HOST(library, "relu", relu);
  TORCHPLUG_ON_HOST(library, "threshold_backward", threshold_backward);
  TORCHPLUG_ON_HOST(library, "sum.dim_IntList", sum_dim_IntList);
  TORCHPLUG_ON_HOST(library, "mean.dim", mean_dim);
  // Without a device kernel, mse_loss reaches the composite that calls
  // mse_loss.out with a 0-d out, which the CPU kernel resizes with a warning.
  TORCHPLUG_ON_HOST(library, "mse_loss", mse_loss);
  TORCHPLUG_ON_HOST(library, "_log_softmax", _log_softmax);
  TORCHPLUG_ON_HOST(library, "_log_softmax_backward_data", _log_softmax_backward_data);
  TORCHPLUG_ON_HOST(library, "convolution_overrideable", convolution);
  library.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace torchplug
