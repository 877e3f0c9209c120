// Unboxed kernels for hot functional operators: the CPU kernel runs over host
// aliases of the device tensors, called directly rather than through the
// boxed fallback, and its output is taken over as device memory. Same
// semantics as the fallback, without boxing and without the second
// TensorIterator a composite functional-from-out= kernel would build. On a
// device whose memory the host cannot address they run through the copying
// fallback instead (their device semantics, e.g. CUDA's histc, stay).
//
// Same-device binary arithmetic goes further and skips the aliases: it runs
// the CPU vector loop over a TensorIterator built on the device tensors.

// The loops are reached through ATen's DispatchStubs.
#include "kernels/dispatch_stubs.h"

#include <array>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include <ATen/Dispatch.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/ConvUtils.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/convolution_backward_ops.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/zero_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/histc_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_ops.h>

#include "backend/backend.h"
#include "kernels/call_shapes.h"
#include "kernels/cpu_fallback.h"
#include "kernels/tensor_arguments.h"
#include "kernels/wrapped_numbers.h"
#include "memory/host_alias.h"
#include "launch/kernel_launch.h"
#include "driver/memory_access.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

struct HostCall {
  KernelDevice operands;
  std::vector<const void*> accessed;  // strict mode only
  HostAliases aliases;

  at::Tensor alias(const at::Tensor& tensor) {
    operands.note(tensor);
    if (!tensor.defined() || tensor.device().is_cpu()) {
      return tensor;
    }
    if (driver::strict_memory()) {
      accessed.push_back(tensor.storage().data());
    }
    return aliases.alias(tensor);
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
  HostCall host{KernelDevice(Op::name)};
  auto host_args = std::tuple<decltype(host.convert(std::forward<Args>(args)))...>{
      host.convert(std::forward<Args>(args))...};
  device = host.operands.device();
  const KernelLaunch launch(Op::name, device, host.accessed);
  return std::apply(
      [](auto&&... converted) { return Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), converted...); },
      host_args);
}

// The dense keys of the first device among `args` whose memory the host
// cannot address, if any: such a call runs through the CPU fallback, which
// copies, instead of over host aliases.
template <typename... Args>
std::optional<c10::DispatchKeySet> copying_device_keys(const Args&... args) {
  std::optional<c10::DispatchKeySet> keys;
  for_each_device_tensor(
      [&keys](const at::Tensor& tensor) {
        const BackendIdentity* identity = find_backend(tensor.device().type());
        if (!keys.has_value() && identity != nullptr && !identity->host_addressable) {
          keys = identity->dense_keys;
        }
      },
      args...);
  return keys;
}

// The device of a call that would be queued on the device's stream (see
// queues_kernel): such calls take the boxed path, which queues them once
// their results' shapes are known (see queue_host_call).
template <typename... Args>
std::optional<c10::Device> queueing_device(const Args&... args) {
  std::optional<c10::Device> device;
  int64_t work = 0;
  for_each_device_tensor(
      [&](const at::Tensor& tensor) {
        device = device.value_or(tensor.device());
        work += tensor.numel();
      },
      args...);
  return device.has_value() && queues_kernel(*device, work) ? device : std::nullopt;
}

// The CPU kernel's outputs taken over as device memory (an output a backward
// kernel was asked not to compute stays undefined).
at::Tensor adopt_results(const at::Tensor& result, c10::Device device) {
  return result.defined() ? adopt_host_tensor(result, device) : result;
}

template <typename... Results>
std::tuple<Results...> adopt_results(const std::tuple<Results...>& results, c10::Device device) {
  return std::apply([&](const auto&... each) { return std::tuple<Results...>{adopt_results(each, device)...}; },
                    results);
}

template <typename Op, typename Schema = typename Op::schema>
struct OnHost;

template <typename Op, typename Result, typename... Args>
struct OnHost<Op, Result(Args...)> {
  static Result call(Args... args) {
    if (const auto keys = copying_device_keys(args...)) {
      return call_through_fallback<Op>(*keys, std::forward<Args>(args)...);
    }
    if (const auto queueing = queueing_device(args...)) {
      return call_cpu_kernel<Op>(ActivityKind::kKernel, device_key_set(queueing->type()), std::forward<Args>(args)...);
    }
    LearnedAtOnce<Op> learned(args...);
    c10::Device device(c10::kCPU);
    Result results = adopt_results(run_on_host<Op>(device, std::forward<Args>(args)...), device);
    learned.learn(results);
    return results;
  }
};

// The second operand the direct device loops run with, or none when they
// cannot run and the call takes the aliasing path (which also raises the
// same-device errors). The loops run on a device whose data pointers
// TensorIterator hands out (DeviceKind::iterator_sees_data), over dense
// operands, outside strict mode (whose kernels get memory access only within
// a scope around host aliases). The CPU loops expect their inputs cast
// already, and TensorIterator casts only on the CPU: `other` is taken as it is
// when it is a device tensor of self's dtype; a device tensor of another dtype
// (a dropout mask) and a Python number (a 0-dim CPU "wrapped number") are cast
// to self's dtype first, as the CPU's iterator casts them, when the result
// keeps that dtype.
std::optional<at::Tensor> device_loop_operand(const at::Tensor& self, const at::Tensor& other) {
  if (self.device().is_cpu() || driver::strict_memory() || self.layout() != c10::kStrided ||
      other.layout() != c10::kStrided || !backend(self.device().type()).kind->iterator_sees_data) {
    return std::nullopt;
  }
  if (other.device() == self.device() && other.scalar_type() == self.scalar_type()) {
    return other;
  }
  // Not into bf16 or half: with a scalar operand, the CPU's loops compute in
  // float with the scalar as given, not rounded to self's dtype first.
  const bool number = other.device().is_cpu() && other.dim() == 0 && is_wrapped_number(other);
  const bool castable = !at::isReducedFloatingType(self.scalar_type()) && (other.device() == self.device() || number);
  if (!castable || promoted_type(self, other) != self.scalar_type()) {
    return std::nullopt;
  }
  return number ? wrapped_number_in(other, self.scalar_type()) : other.to(self.scalar_type());
}

// The output is allocated on the device by the iterator; the CPU loop then
// reads and writes device memory directly, since it is host memory. `alpha`
// is checked against the computation's dtype at launch. A kernel that is not
// queued runs at once over the iterator built here; a queued one over an
// iterator built on the stream again (this one refers to the call's
// arguments by address), so `loop` must own what it uses.
template <typename Op, typename Loop>
at::Tensor binary_on_device(const at::Tensor& self, const at::Tensor& other, const c10::Scalar* alpha, Loop loop) {
  at::Tensor result;
  at::TensorIterator iter = at::TensorIterator::borrowing_binary_op(result, self, other);
  if (alpha != nullptr) {
    at::native::alpha_check(iter.dtype(), *alpha);
  }
  const at::Tensor& output = iter.output();
  launch_prepared_kernel(
      Op::name, self.device(), output.numel(), [&] { loop(iter); },
      [loop](const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
        at::TensorIterator queued = at::TensorIterator::borrowing_binary_op(out, a, b);
        loop(queued);
      },
      output, self, other);
  return output;
}

at::Tensor add_Tensor(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  const std::optional<at::Tensor> operand = device_loop_operand(self, other);
  if (!operand) {
    return OnHost<at::_ops::add_Tensor>::call(self, other, alpha);
  }
  return binary_on_device<at::_ops::add_Tensor>(
      self, *operand, &alpha, [alpha](at::TensorIterator& iter) { at::native::add_stub(c10::kCPU, iter, alpha); });
}

at::Tensor sub_Tensor(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  const std::optional<at::Tensor> operand = device_loop_operand(self, other);
  if (!operand) {
    return OnHost<at::_ops::sub_Tensor>::call(self, other, alpha);
  }
  at::native::sub_check(self, other);
  return binary_on_device<at::_ops::sub_Tensor>(
      self, *operand, &alpha, [alpha](at::TensorIterator& iter) { at::native::add_stub(c10::kCPU, iter, -alpha); });
}

at::Tensor mul_Tensor(const at::Tensor& self, const at::Tensor& other) {
  const std::optional<at::Tensor> operand = device_loop_operand(self, other);
  if (!operand) {
    return OnHost<at::_ops::mul_Tensor>::call(self, other);
  }
  return binary_on_device<at::_ops::mul_Tensor>(
      self, *operand, nullptr, [](at::TensorIterator& iter) { at::native::mul_stub(c10::kCPU, iter); });
}

at::Tensor div_Tensor(const at::Tensor& self, const at::Tensor& other) {
  const bool integers_promote = !at::isFloatingType(self.scalar_type()) && !at::isComplexType(self.scalar_type());
  const std::optional<at::Tensor> operand = integers_promote ? std::nullopt : device_loop_operand(self, other);
  if (!operand) {
    return OnHost<at::_ops::div_Tensor>::call(self, other);
  }
  return binary_on_device<at::_ops::div_Tensor>(
      self, *operand, nullptr, [](at::TensorIterator& iter) { at::native::div_true_stub(c10::kCPU, iter); });
}

// In-place arithmetic (gradient accumulation, optimizer updates) on the
// direct loops, when `other` needs no broadcasting into self: the CPU's own
// in-place checks (shape, overlap, a result type that casts to self's) are
// then exactly TensorIterator's. Everything else takes the aliasing fallback.
std::optional<at::Tensor> in_place_operand(const at::Tensor& self, const at::Tensor& other) {
  if (other.dim() != 0 && other.sizes() != self.sizes()) {
    return std::nullopt;
  }
  return device_loop_operand(self, other);
}

template <typename Op, typename Loop>
at::Tensor& binary_in_place(at::Tensor& self, const at::Tensor& other, const c10::Scalar* alpha, Loop loop) {
  at::TensorIterator iter = at::TensorIterator::borrowing_binary_op(self, self, other);
  if (alpha != nullptr) {
    at::native::alpha_check(iter.dtype(), *alpha);
  }
  launch_prepared_kernel(
      Op::name, self.device(), self.numel(), [&] { loop(iter); },
      [loop](const at::Tensor& written, const at::Tensor& operand) {
        at::TensorIterator queued = at::TensorIterator::borrowing_binary_op(written, written, operand);
        loop(queued);
      },
      self, other);
  return self;
}

at::Tensor& add__Tensor(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  const std::optional<at::Tensor> operand = in_place_operand(self, other);
  if (!operand) {
    return call_through_fallback<at::_ops::add__Tensor>(device_key_set(self.device().type()), self, other, alpha);
  }
  return binary_in_place<at::_ops::add__Tensor>(
      self, *operand, &alpha, [alpha](at::TensorIterator& iter) { at::native::add_stub(c10::kCPU, iter, alpha); });
}

at::Tensor& mul__Tensor(at::Tensor& self, const at::Tensor& other) {
  const std::optional<at::Tensor> operand = in_place_operand(self, other);
  if (!operand) {
    return call_through_fallback<at::_ops::mul__Tensor>(device_key_set(self.device().type()), self, other);
  }
  return binary_in_place<at::_ops::mul__Tensor>(
      self, *operand, nullptr, [](at::TensorIterator& iter) { at::native::mul_stub(c10::kCPU, iter); });
}

// Zeroing a dense tensor (zero_grad(set_to_none=False), torch.zeros) is one
// memset of the device memory, as the CPU's small-tensor path does.
at::Tensor& zero_(at::Tensor& self) {
  const bool direct = !driver::strict_memory() && self.layout() == c10::kStrided &&
                      backend(self.device().type()).kind->iterator_sees_data && self.is_non_overlapping_and_dense();
  if (!direct) {
    return call_through_fallback<at::_ops::zero_>(device_key_set(self.device().type()), self);
  }
  if (self.numel() > 0) {
    launch_kernel(
        at::_ops::zero_::name, self.device(), self.numel(),
        [](const at::Tensor& zeroed) { std::memset(zeroed.data_ptr(), 0, zeroed.numel() * zeroed.element_size()); },
        self);
  }
  return self;
}

// Convolutions on devices other than CPU and CUDA reach the "overrideable"
// entry points; they are the CPU convolutions over host aliases. The CPU
// kernels may answer channels-last for a channels-last weight, while torch
// (and torch.compile's fake tensors, which must agree with eager) says what
// layout an overrideable convolution returns: the results take that layout.
at::Tensor in_overrideable_layout(const at::Tensor& result, const at::Tensor& input, const at::Tensor& weight) {
  if (!result.defined()) {
    return result;
  }
  const at::MemoryFormat layout =
      at::native::_determine_backend_memory_format(input, weight, at::native::ConvBackend::Overrideable);
  const bool fits = (layout == at::MemoryFormat::ChannelsLast && result.dim() == 4) ||
                    (layout == at::MemoryFormat::ChannelsLast3d && result.dim() == 5);
  return result.contiguous(fits ? layout : at::MemoryFormat::Contiguous);
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                                    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  return in_overrideable_layout(OnHost<at::_ops::convolution>::call(input, weight, bias, stride, padding, dilation,
                                                                    transposed, output_padding, std::move(groups)),
                                input, weight);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  std::optional<c10::SymIntArrayRef> bias_sizes;
  const std::array<c10::SymInt, 1> bias_size{weight.sym_size(transposed ? 1 : 0) * (transposed ? groups : 1)};
  if (output_mask[2]) {
    bias_sizes = c10::SymIntArrayRef(bias_size);
  }
  auto [grad_input, grad_weight, grad_bias] = OnHost<at::_ops::convolution_backward>::call(
      grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
      output_mask);
  return {in_overrideable_layout(grad_input, input, weight), in_overrideable_layout(grad_weight, input, weight),
          grad_bias};
}

// CUDA's histc counts integral tensors too and the CPU's refuses them; code
// picks the dtype by device type (transformers' mixture-of-experts loss
// passes int32 everywhere but on the CPU), so devices answer as CUDA does.
// Counting the values as doubles puts each in the bin CUDA's integer
// arithmetic does.
at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    return OnHost<at::_ops::histc>::call(self, bins, min, max);
  }
  return OnHost<at::_ops::histc>::call(self.to(at::kDouble), bins, min, max).to(self.scalar_type());
}

// arange's CPU kernel resizes its output to the size its numbers give, which
// only a call run at once can do to device memory: sized here first (as the
// CPU sizes it), the call queues like any other once its signature ran, and a
// graph can capture it (the position ids of every transformer).
at::Tensor& sized_arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                             at::Tensor& out) {
  const int64_t size = AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "arange", [&] {
    return at::native::compute_arange_size<scalar_t>(start, end, step);
  });
  if (out.numel() != size) {
    out.resize_({size});
  }
  return call_through_fallback<at::_ops::arange_start_out>(backend(out.device().type()).dense_keys, start, end, step,
                                                           out);
}

template <typename Op>
void on_host(DeviceKernels& library) {
  library.impl<Op>(TORCH_FN((&OnHost<Op>::call)));
}

}  // namespace

void register_direct_loop_kernels(DeviceKernels& library) {
  library.impl("add.Tensor", TORCH_FN(add_Tensor));
  library.impl("sub.Tensor", TORCH_FN(sub_Tensor));
  library.impl("mul.Tensor", TORCH_FN(mul_Tensor));
  library.impl("div.Tensor", TORCH_FN(div_Tensor));
  library.impl("add_.Tensor", TORCH_FN(add__Tensor));
  library.impl("mul_.Tensor", TORCH_FN(mul__Tensor));
  library.impl("zero_", TORCH_FN(zero_));
}

void register_host_kernels(DeviceKernels& library) {
  on_host<at::_ops::mean_dim>(library);
  // The CPU computes float GELU with oneDNN, which only CPU tensors reach.
  on_host<at::_ops::gelu>(library);
  on_host<at::_ops::gelu_backward>(library);
  // Without a device kernel, mse_loss reaches the composite that calls
  // mse_loss.out with a 0-d out, which the CPU kernel resizes with a warning.
  on_host<at::_ops::mse_loss>(library);
  library.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  library.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  library.impl("histc", TORCH_FN(histc));
  library.impl<at::_ops::arange_start_out>(TORCH_FN(sized_arange_out));
}

}  // namespace torchplug
