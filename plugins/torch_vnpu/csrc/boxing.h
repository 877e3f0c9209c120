#pragma once
// Registers a kernel written over TensorHandle with torch's stable library:
//
//   m.impl("rms_norm", torch_vnpu::boxed<&torch_vnpu::rms_norm>);
//
// As TORCH_BOX for torch::stable::Tensor: the kernel takes its tensor
// arguments as the handles torch passes (owned), and its results' handles go
// back to torch, with no wrapper allocated on either way.
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include <torch/csrc/stable/stableivalue_conversions.h>
#include <torch/headeronly/util/Exception.h>

#include "tensor_handle.h"

namespace torch_vnpu {
namespace boxing {

template <typename T>
T unbox(StableIValue value) {
  return torch::stable::detail::to<T>(value);
}

template <>
inline TensorHandle unbox<TensorHandle>(StableIValue value) {
  return TensorHandle(torch::stable::detail::to<AtenTensorHandle>(value));
}

inline StableIValue box(TensorHandle result) { return torch::stable::detail::from(result.release()); }

template <typename Signature>
struct Kernel;

template <typename Result, typename... Args>
struct Kernel<Result(Args...)> {
  static constexpr uint64_t kOutputs = 1;

  template <auto kernel, size_t... I>
  static void call(StableIValue* stack, std::index_sequence<I...> /*arguments*/) {
    // Each argument's handle is owned (and freed on an exception) from here on.
    std::tuple<Args...> arguments{unbox<Args>(stack[I])...};
    stack[0] = box(kernel(std::move(std::get<I>(arguments))...));
  }
};

template <typename... Results, typename... Args>
struct Kernel<std::tuple<Results...>(Args...)> {
  static constexpr uint64_t kOutputs = sizeof...(Results);

  template <auto kernel, size_t... I>
  static void call(StableIValue* stack, std::index_sequence<I...> /*arguments*/) {
    std::tuple<Args...> arguments{unbox<Args>(stack[I])...};
    std::tuple<Results...> results = kernel(std::move(std::get<I>(arguments))...);
    std::apply([&](auto&... result) {
      size_t slot = 0;
      ((stack[slot++] = box(std::move(result))), ...);
    }, results);
  }
};

template <typename Function>
struct Arity;

template <typename Result, typename... Args>
struct Arity<Result (*)(Args...)> {
  using Signature = Result(Args...);
  static constexpr uint64_t kArguments = sizeof...(Args);
};

}  // namespace boxing

template <auto kernel>
void boxed(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  using Traits = boxing::Arity<decltype(kernel)>;
  using Signature = boxing::Kernel<typename Traits::Signature>;
  STD_TORCH_CHECK(num_args == Traits::kArguments && num_outputs == Signature::kOutputs,
                  "torch_vnpu: an operator's schema has ", num_args, " arguments and ", num_outputs,
                  " results, but its kernel takes ", Traits::kArguments, " and returns ", Signature::kOutputs,
                  "; the schema in register.cpp and the kernel in ops.h disagree.");
  Signature::template call<kernel>(stack, std::make_index_sequence<Traits::kArguments>{});
}

}  // namespace torch_vnpu
