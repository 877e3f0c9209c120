#pragma once
// The aten kernels of a device type's dense key, registered at the type's
// first tensor rather than at activation (see registration/kernels.h). By
// then a user's torch.library.impl or a plugin's setup may have given an
// operator a kernel of the key; the later registration would shadow it, so
// such an operator keeps the kernel it was given.
#include <string>
#include <utility>

#include <c10/core/DispatchKey.h>
#include <torch/library.h>

namespace torchplug {

class DeviceKernels {
 public:
  DeviceKernels(torch::Library& library, c10::DispatchKey key) : library_(library), key_(key) {}

  // `name` as torch::Library::impl takes it in the aten namespace ("add.Tensor").
  template <typename Func>
  DeviceKernels& impl(const char* name, Func&& func) {
    if (!given_elsewhere(name)) {
      library_.impl(name, std::forward<Func>(func));
    }
    return *this;
  }

  // The kernel of the ATen operator `Op` (an at::_ops struct), registered
  // under the name its schema gives it.
  template <typename Op, typename Func>
  DeviceKernels& impl(Func&& func) {
    return impl(operator_name(Op::name, Op::overload_name).c_str(), std::forward<Func>(func));
  }

 private:
  // "aten::eq" and "Tensor" as torch::Library::impl names it: "eq.Tensor".
  static std::string operator_name(const char* qualified_name, const char* overload_name);
  bool given_elsewhere(const char* name) const;

  torch::Library& library_;
  c10::DispatchKey key_;
};

}  // namespace torchplug
