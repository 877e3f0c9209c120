// Native kernels for hot operators: the CPU's own kernel run over the device
// tensors themselves, which is possible because device memory is host memory.
// Outputs come from the device's caching allocator, so a call skips the
// fallback's boxing, host aliases and adoption of CPU-allocated results, which
// dominate small ops.
//
//  - Structured: a CPU structured kernel class computes output shapes (meta)
//    and the result (impl); this file allocates the outputs on the device.
//    Kernels that call a DispatchStub with the iterator's device type reach
//    the CPU loops through the PrivateUse1 slots (see cpu_stub_slots.h).
//  - Direct: a CPU native function that allocates through the dispatcher and
//    names the CPU in its own stub calls, called on the device tensors.
//  - Composite: a CPU native function that only calls other operators.
//
// Only where the device's memory is what TensorIterator hands out and strict
// mode is off; elsewhere the call takes the aliasing fallback. In strict mode
// a kernel's memory access is granted around host aliases only: over the
// device tensors, what the CPU kernel allocates on the way (a contiguous
// copy, a resolved conjugate) would be device memory outside the grant.
#include <array>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/ops/_log_softmax_backward_data_native.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_native.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/mm_native.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/native_dropout_backward_native.h>
#include <ATen/ops/native_dropout_backward_ops.h>
#include <ATen/ops/native_dropout_native.h>
#include <ATen/ops/native_dropout_ops.h>
#include <ATen/ops/native_layer_norm_backward_native.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_native.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/nll_loss_backward_native.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_native.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_backward_native.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sum_native.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/all_native.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/isneginf_native.h>
#include <ATen/ops/isneginf_ops.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/tril_native.h>
#include <ATen/ops/tril_ops.h>
#include <ATen/ops/triu_native.h>
#include <ATen/ops/triu_ops.h>
#include <ATen/ops/tanh_backward_native.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <c10/core/DeviceGuard.h>

#include "backend/backend.h"
#include "kernels/call_shapes.h"
#include "kernels/cpu_fallback.h"
#include "kernels/tensor_arguments.h"
#include "kernels/wrapped_numbers.h"
#include "memory/device_allocator.h"
#include "memory/host_alias.h"
#include "launch/kernel_launch.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

// A CPU structured kernel whose outputs live on `device`.
template <class CpuKernel, size_t Outputs = 1>
struct OnDevice final : CpuKernel {
  explicit OnDevice(c10::Device device) : device(device) {}

  void set_output_strided(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    set_output_raw_strided(index, sizes, strides, options);
  }

  void set_output_raw_strided(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    allocate(index, sizes, strides, options);
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, CpuKernel>) {
      CpuKernel::set_output_raw_strided(index, sizes, strides, options);  // registers the operand
    }
  }

  const at::Tensor& maybe_get_output(int64_t index) override { return outputs[index]; }

  void allocate(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::TensorOptions options) {
    const c10::DeviceGuard guard(device);  // the allocator serves the current device
    const c10::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
    // Empty strides mean "any layout": contiguous in the requested memory format.
    outputs[index] = strides.empty()
                         ? at::detail::empty_generic(sizes, &device_allocator(device.type()),
                                                     device_key_set(device.type()), dtype,
                                                     options.memory_format_opt())
                         : at::detail::empty_strided_generic(sizes, strides, &device_allocator(device.type()),
                                                             device_key_set(device.type()), dtype);
  }

  c10::Device device;
  std::array<at::Tensor, Outputs> outputs;
};

// The device a kernel runs on, from its tensor arguments (see KernelDevice):
// one device for all of them, CPU scalars aside, as the CPU fallback decides.
template <typename T>
void note_operand(KernelDevice& where, const T& argument) {
  if constexpr (std::is_same_v<T, at::Tensor>) {
    where.note(argument);
  } else if constexpr (std::is_same_v<T, std::optional<at::Tensor>>) {
    if (argument.has_value()) {
      where.note(*argument);
    }
  }
}

template <typename... Args>
c10::Device kernel_device(const char* op, const Args&... args) {
  KernelDevice where(op);
  (note_operand(where, args), ...);
  return where.device();
}

// The same for a kernel writing `written` (self of an in-place call, out of
// an out= one), which must be on the kernel's device even when 0-dim, as
// CUDA's generated checks require: a host tensor would be written by the
// device kernel.
template <typename... Args>
c10::Device writing_kernel_device(const char* op, const at::Tensor& written, const char* argument,
                                  const Args&... args) {
  KernelDevice where(op);
  (note_operand(where, args), ...);
  const c10::Device device = where.device();
  if (written.device() != device) {
    c10::impl::common_device_check_failure(device, written, op, argument);
  }
  return device;
}

// The same, checked as torch's generated device checks of CUDA's matrix
// products are: every tensor argument on one device, each named in the error.
template <typename Op, typename... Args>
c10::Device checked_kernel_device(const Args&... args) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> found;
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    for (const c10::Argument& argument : op.schema().arguments()) {
      found.push_back(argument.name());
    }
    return found;
  }();
  KernelDevice where(Op::name);
  size_t position = 0;
  auto note = [&](const auto& argument) {
    if constexpr (std::is_same_v<std::decay_t<decltype(argument)>, at::Tensor>) {
      where.note(argument, names[position].c_str());
    }
    ++position;
  };
  (note(args), ...);
  return where.device();
}

// The native functions take concrete sizes where the schema has symbolic ones.
template <typename T>
decltype(auto) concrete(T&& argument) {
  if constexpr (std::is_same_v<std::decay_t<T>, c10::SymIntArrayRef>) {
    return C10_AS_INTARRAYREF_SLOW(argument);
  } else if constexpr (std::is_same_v<std::decay_t<T>, c10::SymInt>) {
    return argument.expect_int();
  } else {
    return std::forward<T>(argument);
  }
}

// TensorIterator casts operands to the computation's dtype only on the CPU;
// the CPU loops read every operand as that dtype. Calls that mix dtypes (an
// integer tensor into exp, a double scalar tensor) take the fallback, whose
// host aliases the iterator casts.
bool loops_need_no_casts(const at::TensorIteratorBase& iter) {
  for (int index = iter.noutputs(); index < iter.ntensors(); ++index) {
    if (iter.dtype(index) != iter.dtype(0)) {
      return false;
    }
  }
  return true;
}

// A CPU structured kernel writing into an existing device tensor (in-place and
// out= calls). Only an output that fits as it is (its shape and dtype) is
// written here; anything else (resizing an out=, a broadcast into self) takes
// the fallback, which does and says what the CPU does.
template <class CpuKernel, size_t Outputs = 1>
struct IntoDevice final : CpuKernel {
  template <typename... Written>
  explicit IntoDevice(const Written&... written) : outputs{&written...} {
    static_assert(sizeof...(Written) == Outputs, "one tensor per output");
  }

  void set_output_strided(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    set_output_raw_strided(index, sizes, strides, options);
  }

  void set_output_raw_strided(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    const at::Tensor& output = *outputs[index];
    fits = fits && sizes == output.sizes() && options.dtype() == output.dtype();
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, CpuKernel>) {
      if (fits) {
        CpuKernel::set_output_raw_strided(index, sizes, strides, options);  // registers the operand
      }
    }
  }

  const at::Tensor& maybe_get_output(int64_t index) override { return *outputs[index]; }

  std::array<const at::Tensor*, Outputs> outputs;
  bool fits = true;
};

// Structured kernels take an optional tensor as an OptionalTensorRef, and
// concrete sizes where the schema has symbolic ones.
template <typename T>
decltype(auto) structured_argument(const T& argument) {
  if constexpr (std::is_same_v<T, std::optional<at::Tensor>>) {
    return argument.has_value() && argument->defined() ? at::OptionalTensorRef(*argument) : at::OptionalTensorRef();
  } else if constexpr (std::is_same_v<T, c10::SymInt>) {
    return argument.expect_int();
  } else {
    return (argument);
  }
}

// Launches `CpuKernel` writing into `output`, whose meta function already
// ran in `prepared` and accepted its shape and dtype: at once, `prepared`
// runs. A queued kernel runs its meta function once more where it runs: the
// iterator it builds refers to its operands by address.
template <class CpuKernel, class Prepared, typename... Inputs>
void launch_into_device(const char* name, c10::Device device, Prepared& prepared, const at::Tensor& output,
                        const Inputs&... inputs) {
  launch_prepared_kernel(
      name, device, output.numel(), [&] { prepared.impl(structured_argument(inputs)..., output); },
      [](const at::Tensor& written, const auto&... kept) {
        IntoDevice<CpuKernel> kernel(written);
        kernel.meta(structured_argument(kept)...);
        kernel.impl(structured_argument(kept)..., written);
      },
      output, inputs...);
}

enum class DeviceCheck { kOperands, kNamedArguments };

template <typename Op, typename CpuKernel, DeviceCheck check = DeviceCheck::kOperands,
          typename Schema = typename Op::schema>
struct Structured;

template <typename Op, typename CpuKernel, DeviceCheck check, typename... Args>
struct Structured<Op, CpuKernel, check, at::Tensor(Args...)> {
  static at::Tensor call(Args... args) {
    const c10::Device device = check == DeviceCheck::kNamedArguments ? checked_kernel_device<Op>(args...)
                                                                      : kernel_device(Op::name, args...);
    if (!runs_over_device_memory(device)) {
      return call_through_fallback<Op>(device_key_set(device.type()), args...);
    }
    OnDevice<CpuKernel> kernel(device);
    kernel.meta(structured_argument(args)...);
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, CpuKernel>) {
      if (!loops_need_no_casts(kernel)) {
        return call_through_fallback<Op>(device_key_set(device.type()), args...);
      }
    }
    launch_into_device<CpuKernel>(Op::name, device, kernel, kernel.outputs[0], args...);
    return std::move(kernel.outputs[0]);
  }
};

// The same for kernels with two outputs (nll_loss_forward: the loss and the
// total weight).
template <typename Op, typename CpuKernel, DeviceCheck check, typename... Args>
struct Structured<Op, CpuKernel, check, std::tuple<at::Tensor, at::Tensor>(Args...)> {
  static std::tuple<at::Tensor, at::Tensor> call(Args... args) {
    const c10::Device device = kernel_device(Op::name, args...);
    if (!runs_over_device_memory(device)) {
      return call_through_fallback<Op>(device_key_set(device.type()), args...);
    }
    OnDevice<CpuKernel, 2> kernel(device);
    kernel.meta(structured_argument(args)...);
    static_assert(!std::is_base_of_v<at::TensorIteratorBase, CpuKernel>, "no two-output iterator kernel is served");
    launch_kernel(
        Op::name, device, kernel.outputs[0].numel(),
        [](const at::Tensor& first, const at::Tensor& second, const auto&... kept) {
          IntoDevice<CpuKernel, 2> queued(first, second);
          queued.meta(structured_argument(kept)...);
          queued.impl(structured_argument(kept)..., first, second);
        },
        kernel.outputs[0], kernel.outputs[1], args...);
    return {std::move(kernel.outputs[0]), std::move(kernel.outputs[1])};
  }
};

template <typename Op, auto native, typename Schema = typename Op::schema>
struct Direct;

template <typename Op, auto native, typename Return, typename... Args>
struct Direct<Op, native, Return(Args...)> {
  static Return call(Args... args) {
    const c10::Device device = kernel_device(Op::name, args...);
    if (!runs_over_device_memory(device)) {
      return call_through_fallback<Op>(device_key_set(device.type()), args...);
    }
    if (queues_kernel(device, device_work(args...))) {
      // Queued as a host call: its results are allocated before it runs.
      return call_cpu_kernel<Op>(ActivityKind::kKernel, device_key_set(device.type()), args...);
    }
    LearnedAtOnce<Op> learned(args...);
    const KernelLaunch launch(Op::name, device);
    Return results = native(concrete(args)...);
    learned.learn(results);
    return results;
  }
};

// The CPU's bmm hands reduced-precision products (bf16, fp16, and fp32 when
// oneDNN's fp32 matmul precision is lowered) to oneDNN, which refuses device
// tensors and then turns itself off for the whole process: those calls run
// over host aliases, as every CPU tensor's would.
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  const c10::ScalarType dtype = self.scalar_type();
  const at::Float32Precision precision =
      at::globalContext().float32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL);
  const bool onednn = dtype == c10::kBFloat16 || dtype == c10::kHalf ||
                      (dtype == c10::kFloat &&
                       (precision == at::Float32Precision::BF16 || precision == at::Float32Precision::TF32));
  if (onednn) {
    const c10::Device device = checked_kernel_device<at::_ops::bmm>(self, mat2);
    return call_through_fallback<at::_ops::bmm>(device_key_set(device.type()), self, mat2);
  }
  return Structured<at::_ops::bmm, at::native::structured_bmm_out_cpu, DeviceCheck::kNamedArguments>::call(self, mat2);
}

// The CPU's sum accumulates bf16 and half over several dimensions in float
// first, on CPU tensors only (it asks the output's device): those sums run
// over host aliases, as every CPU tensor's would.
at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  if (at::isReducedFloatingType(self.scalar_type()) || (dtype.has_value() && at::isReducedFloatingType(*dtype))) {
    const c10::Device device = kernel_device(at::_ops::sum_dim_IntList::name, self);
    return call_through_fallback<at::_ops::sum_dim_IntList>(device_key_set(device.type()), self, dim, keepdim, dtype);
  }
  return Structured<at::_ops::sum_dim_IntList, at::native::structured_sum_out>::call(self, dim, keepdim, dtype);
}

// A Python number (a wrapped 0-dim CPU tensor, as in `x.mul_(0.9)` and the
// optimizers' foreach steps) cast to the written tensor's dtype, as the CPU's
// iterator casts it. Not into bf16 or half, whose CPU loops compute with the
// number as given: those calls keep it and take the fallback.
at::Tensor number_in_dtype_of(const at::Tensor& written, const at::Tensor& operand) {
  if (is_wrapped_number(operand) && operand.scalar_type() != written.scalar_type() &&
      !at::isReducedFloatingType(written.scalar_type()) && promoted_type(written, operand) == written.scalar_type()) {
    return wrapped_number_in(operand, written.scalar_type());
  }
  return operand;
}

template <typename T>
decltype(auto) in_dtype_of(const at::Tensor& written, T&& argument) {
  if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) {
    return number_in_dtype_of(written, argument);
  } else {
    return std::forward<T>(argument);
  }
}

// Runs `CpuKernel` writing into `output` with `inputs` (its meta arguments),
// when the output fits and no operand needs a cast; false when the call must
// take the fallback instead.
template <class CpuKernel, typename... Inputs>
bool into_device(const char* name, c10::Device device, const at::Tensor& output, const Inputs&... inputs) {
  IntoDevice<CpuKernel> kernel(output);
  kernel.meta(structured_argument(inputs)...);
  if (!kernel.fits) {
    return false;
  }
  if constexpr (std::is_base_of_v<at::TensorIteratorBase, CpuKernel>) {
    if (!loops_need_no_casts(kernel)) {
      return false;
    }
  }
  launch_into_device<CpuKernel>(name, device, kernel, output, inputs...);
  return true;
}

template <typename Op, typename CpuKernel, typename Schema = typename Op::schema>
struct InPlace;

template <typename Op, typename CpuKernel, typename... Rest>
struct InPlace<Op, CpuKernel, at::Tensor&(at::Tensor&, Rest...)> {
  static at::Tensor& call(at::Tensor& self, Rest... rest) {
    const c10::Device device = writing_kernel_device(Op::name, self, "self", self, rest...);
    if (runs_over_device_memory(device) && into_device<CpuKernel>(Op::name, device, self, self, in_dtype_of(self, rest)...)) {
      return self;
    }
    return call_through_fallback<Op>(device_key_set(device.type()), self, rest...);
  }
};

// mul.out: what in-place multiplication by a number (mul_.Scalar, the
// optimizers' _foreach_mul_) comes down to.
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const c10::Device device = writing_kernel_device(at::_ops::mul_out::name, out, "out", self, other, out);
  if (runs_over_device_memory(device) &&
      into_device<at::native::structured_mul_out>(at::_ops::mul_out::name, device, out, in_dtype_of(out, self),
                                                  in_dtype_of(out, other))) {
    return out;
  }
  return call_through_fallback<at::_ops::mul_out>(device_key_set(device.type()), self, other, out);
}

// An out= variant of a structured CPU kernel (`inputs` then `out`), checked as
// torch's generated device checks do.
template <typename Op, typename CpuKernel, typename... Inputs>
at::Tensor& structured_into(at::Tensor& out, const Inputs&... inputs) {
  const c10::Device device = checked_kernel_device<Op>(inputs..., out);
  if (runs_over_device_memory(device) && into_device<CpuKernel>(Op::name, device, out, inputs...)) {
    return out;
  }
  return call_through_fallback<Op>(device_key_set(device.type()), inputs..., out);
}

// mm.out: what _grouped_mm (mixture-of-experts layers) runs once per group,
// into slices of its output, and compiled graphs' matrix products.
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  return structured_into<at::_ops::mm_out, at::native::structured_mm_out_cpu>(out, self, mat2);
}

// addmm.out: compiled graphs' Linear layers (Inductor's extern addmm into a
// buffer it allocated).
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  return structured_into<at::_ops::addmm_out, at::native::structured_addmm_out_cpu>(out, self, mat1, mat2, beta,
                                                                                      alpha);
}

// sqrt.out: each result of the optimizers' _foreach_sqrt (AdamW's
// denominators), computed where it goes.
at::Tensor& sqrt_out(const at::Tensor& self, at::Tensor& out) {
  return structured_into<at::_ops::sqrt_out, at::native::structured_sqrt_out>(out, self);
}

// A CPU native function made only of dispatched operators: on the device each
// of them is a device kernel, so it serves every device and strict mode, and
// its random draws come from the device's generator. (Through the fallback,
// native_dropout, whose schema has no generator argument, would draw from the
// CPU's.)
template <typename Op, auto native, typename Schema = typename Op::schema>
struct Composite;

template <typename Op, auto native, typename Return, typename... Args>
struct Composite<Op, native, Return(Args...)> {
  static Return call(Args... args) {
    const c10::DeviceGuard guard(kernel_device(Op::name, args...));
    return native(concrete(args)...);
  }
};

// fill_ (ones_like, full, zeros of a few elements): the CPU's fill over the
// device tensor, queued like the structured kernels.
at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  const c10::Device device = kernel_device(at::_ops::fill__Scalar::name, self);
  if (!runs_over_device_memory(device)) {
    return call_through_fallback<at::_ops::fill__Scalar>(device_key_set(device.type()), self, value);
  }
  launch_kernel(
      at::_ops::fill__Scalar::name, device, self.numel(),
      [](const at::Tensor& filled, const c10::Scalar& with) {
        at::Tensor target = filled;  // fill_ takes a mutable handle; the view is the same memory
        at::native::fill_(target, with);
      },
      self, value);
  return self;
}

// Each registers one ATen operator's kernel under the name its schema gives
// it, so a registration names the operator once.
template <typename Op, typename CpuKernel, DeviceCheck check = DeviceCheck::kOperands>
void structured(DeviceKernels& library) {
  library.impl<Op>(TORCH_FN((&Structured<Op, CpuKernel, check>::call)));
}

template <typename Op, typename CpuKernel>
void in_place(DeviceKernels& library) {
  library.impl<Op>(TORCH_FN((&InPlace<Op, CpuKernel>::call)));
}

template <typename Op, auto native>
void composite(DeviceKernels& library) {
  library.impl<Op>(TORCH_FN((&Composite<Op, native>::call)));
}

template <typename Op, auto native>
void direct(DeviceKernels& library) {
  library.impl<Op>(TORCH_FN((&Direct<Op, native>::call)));
}

}  // namespace

void register_native_kernels(DeviceKernels& library) {
  namespace ops = at::_ops;
  namespace cpu = at::native;
  library.impl("bmm", TORCH_FN(bmm));
  library.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  library.impl("mul.out", TORCH_FN(mul_out));
  library.impl("mm.out", TORCH_FN(mm_out));
  library.impl("addmm.out", TORCH_FN(addmm_out));
  library.impl("sqrt.out", TORCH_FN(sqrt_out));
  library.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  structured<ops::mm, cpu::structured_mm_out_cpu, DeviceCheck::kNamedArguments>(library);
  structured<ops::addmm, cpu::structured_addmm_out_cpu, DeviceCheck::kNamedArguments>(library);
  structured<ops::pow_Tensor_Scalar, cpu::structured_pow_Tensor_Scalar_out>(library);
  structured<ops::rsqrt, cpu::structured_rsqrt_out>(library);
  structured<ops::sqrt, cpu::structured_sqrt_out>(library);
  structured<ops::neg, cpu::structured_neg_out>(library);
  structured<ops::exp, cpu::structured_exp_out>(library);
  structured<ops::log, cpu::structured_log_out>(library);
  structured<ops::sin, cpu::structured_sin_out>(library);
  structured<ops::cos, cpu::structured_cos_out>(library);
  structured<ops::sigmoid, cpu::structured_sigmoid_out>(library);
  structured<ops::sigmoid_backward, cpu::structured_sigmoid_backward_out>(library);
  structured<ops::tanh, cpu::structured_tanh_out>(library);
  structured<ops::eq_Tensor, cpu::structured_eq_Tensor_out>(library);
  structured<ops::eq_Scalar, cpu::structured_eq_Scalar_out>(library);
  structured<ops::isneginf, cpu::structured_isneginf_out>(library);
  structured<ops::all, cpu::structured_all_all_out>(library);
  structured<ops::tril, cpu::structured_tril_cpu>(library);
  structured<ops::triu, cpu::structured_triu_cpu>(library);
  structured<ops::tanh_backward, cpu::structured_tanh_backward_out>(library);
  structured<ops::nll_loss_forward, cpu::structured_nll_loss_forward_out_cpu>(library);
  structured<ops::nll_loss_backward, cpu::structured_nll_loss_backward_out_cpu>(library);
  structured<ops::clamp_min, cpu::structured_clamp_min_out>(library);
  structured<ops::silu, cpu::structured_silu_out>(library);
  structured<ops::silu_backward, cpu::structured_silu_backward_out>(library);
  structured<ops::threshold_backward, cpu::structured_threshold_backward_out>(library);
  structured<ops::_softmax, cpu::structured_softmax_cpu_out>(library);
  structured<ops::_softmax_backward_data, cpu::structured_softmax_backward_cpu_out>(library);
  structured<ops::_log_softmax, cpu::structured_log_softmax_cpu_out>(library);
  structured<ops::_log_softmax_backward_data, cpu::structured_log_softmax_backward_cpu_out>(library);
  in_place<ops::div__Tensor, cpu::structured_div_out>(library);
  in_place<ops::lerp__Scalar, cpu::structured_lerp_Scalar>(library);
  in_place<ops::addcmul_, cpu::structured_addcmul_out>(library);
  in_place<ops::addcdiv_, cpu::structured_addcdiv_out>(library);
  in_place<ops::sqrt_, cpu::structured_sqrt_out>(library);
  // The CPU's relu is clamp_min(self, 0).
  composite<ops::relu, &cpu::relu>(library);
  composite<ops::native_dropout, &cpu::native_dropout_cpu>(library);
  composite<ops::native_dropout_backward, &cpu::native_dropout_backward>(library);
  direct<ops::native_layer_norm, &cpu::layer_norm_cpu>(library);
  direct<ops::native_layer_norm_backward, &cpu::layer_norm_backward_cpu>(library);
}

}  // namespace torchplug
