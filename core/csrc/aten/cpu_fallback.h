#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torchplug {

// Runs an operator without a native kernel on its CPU kernel, over aliases of
// the device memory rather than copies (see host_alias.h).
void aliasing_cpu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

}  // namespace torchplug
