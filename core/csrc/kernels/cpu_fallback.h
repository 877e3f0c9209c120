#pragma once
#include <type_traits>
#include <utility>

#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/TypeTraits.h>

#include "profiler/device_activity.h"

namespace torchplug {

// Runs an operator without a native kernel on its CPU kernel: over aliases of
// the device memory where the host may address it (see host_alias.h), else
// over host copies of the bytes it uses, copied back where it writes them
// (see host_mirror.h), in stream order either way.
void cpu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

// The same for an operator whose device kernel is its CPU kernel (the host
// kernels): shown as `kind` in torch.profiler, and counted in the fallback
// report only as ActivityKind::kFallbackKernel.
void run_cpu_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack,
                    ActivityKind kind);

// Calls operator `Op` (an at::_ops class) through run_cpu_kernel from an
// unboxed device kernel. In-place and out= operators return the argument
// they wrote.
template <typename Op, typename... Args>
typename c10::guts::infer_function_traits_t<typename Op::schema>::return_type call_cpu_kernel(
    ActivityKind kind, c10::DispatchKeySet keys, Args&&... args) {
  using Return = typename c10::guts::infer_function_traits_t<typename Op::schema>::return_type;
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
  if constexpr (std::is_lvalue_reference_v<Return>) {
    // The written argument: self of an in-place schema, out of an out= one.
    at::Tensor* written = nullptr;
    auto note_written = [&written](auto&& argument) {
      if constexpr (std::is_same_v<decltype(argument), at::Tensor&>) {
        written = written == nullptr ? &argument : written;
      }
    };
    (note_written(args), ...);
    torch::jit::Stack stack;
    torch::jit::push(stack, std::forward<Args>(args)...);
    run_cpu_kernel(op, keys, &stack, kind);
    return *written;
  } else {
    torch::jit::Stack stack;
    torch::jit::push(stack, std::forward<Args>(args)...);
    run_cpu_kernel(op, keys, &stack, kind);
    return c10::impl::PopResult<Return>::call(stack);
  }
}

// Calls `Op` through the CPU fallback from an unboxed device kernel: the way
// out for the calls its direct path cannot take (strict mode, memory
// TensorIterator does not see).
template <typename Op, typename... Args>
typename c10::guts::infer_function_traits_t<typename Op::schema>::return_type call_through_fallback(
    c10::DispatchKeySet keys, Args&&... args) {
  return call_cpu_kernel<Op>(ActivityKind::kFallbackKernel, keys, std::forward<Args>(args)...);
}

}  // namespace torchplug
