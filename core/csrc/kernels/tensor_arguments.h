#pragma once
// The tensors among an unboxed kernel's arguments.
#include <cstdint>
#include <optional>
#include <type_traits>

#include <ATen/core/Tensor.h>

namespace torchplug {

// Calls `note` on each defined device tensor among `args` (tensors and
// optional tensors).
template <typename Note, typename... Args>
void for_each_device_tensor(const Note& note, const Args&... args) {
  auto visit = [&note](const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, at::Tensor>) {
      if (value.defined() && !value.device().is_cpu()) {
        note(value);
      }
    } else if constexpr (std::is_same_v<T, std::optional<at::Tensor>>) {
      if (value.has_value() && value->defined() && !value->device().is_cpu()) {
        note(*value);
      }
    }
  };
  (visit(args), ...);
}

// The elements the device tensors among `args` hold: the work of a kernel
// over them, which decides whether queueing it pays (see queues_kernel).
template <typename... Args>
int64_t device_work(const Args&... args) {
  int64_t work = 0;
  for_each_device_tensor([&work](const at::Tensor& tensor) { work += tensor.numel(); }, args...);
  return work;
}

}  // namespace torchplug
