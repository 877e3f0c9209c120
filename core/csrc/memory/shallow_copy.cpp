// Dense CPU and PrivateUse1 tensors are shallow-copy compatible, as CPU and
// CUDA are. Upstream's TensorImpl::has_compatible_shallow_copy_type lists the
// dense backends it knows (CPU, CUDA, HPU, XPU, ...) but not PrivateUse1, so
// `torch._has_compatible_shallow_copy_type(cpu, foo)` is False, `param.data =
// foo_tensor` raises, and nn.Module._apply replaces every Parameter on
// `.to("foo")` instead of moving its data: tied weights come apart and
// optimizers hold stale Parameters. This file answers both questions as
// torch does for CUDA.
#include "memory/shallow_copy.h"

#include <mutex>

#include <ATen/core/Tensor.h>
#include <ATen/core/VariableHooksInterface.h>
#include <torch/library.h>

#include "backend/backend.h"

namespace torchplug {
namespace {

bool is_dense_strided(const at::TensorBase& tensor) {
  return tensor.layout() == c10::kStrided && !tensor.is_quantized() && !tensor.is_nested() &&
         !tensor.key_set().has(c10::DispatchKey::Python);
}

// Upstream already answers every pair that does not involve PrivateUse1.
bool bridged_pair(const at::TensorBase& self, const at::TensorBase& other) {
  const bool self_on_privateuse1 = self.device().type() == c10::DeviceType::PrivateUse1;
  const bool other_on_privateuse1 = other.device().type() == c10::DeviceType::PrivateUse1;
  if (!(self_on_privateuse1 || other_on_privateuse1) || find_device_runtime(c10::DeviceType::PrivateUse1) == nullptr) {
    return false;
  }
  return is_dense_strided(self) && is_dense_strided(other);
}

bool compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return bridged_pair(self, from) || self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// Delegates to torch's autograd variable hooks and lets `set_data` move a
// dense tensor between the CPU (or another dense device) and PrivateUse1.
class BridgingVariableHooks final : public at::impl::VariableHooksInterface {
 public:
  explicit BridgingVariableHooks(at::impl::VariableHooksInterface* upstream) : upstream_(upstream) {}

  void set_data(const at::TensorBase& self, const at::TensorBase& new_data) const override {
    if (!bridged_pair(self, new_data) || self.device().type() == new_data.device().type()) {
      upstream_->set_data(self, new_data);
      return;
    }
    // Upstream's check accepts identical key sets; the shallow copy that
    // follows replaces self's keys with new_data's anyway. Restored if the
    // remaining checks (dtype, requires_grad) refuse the assignment.
    c10::TensorImpl* impl = self.unsafeGetTensorImpl();
    const c10::Device original_device = self.device();
    impl->_change_backend_component_keys(new_data.device());
    try {
      upstream_->set_data(self, new_data);
    } catch (...) {
      impl->_change_backend_component_keys(original_device);
      throw;
    }
  }

  at::TensorBase tensor_data(const at::TensorBase& self) const override { return upstream_->tensor_data(self); }
  at::TensorBase variable_data(const at::TensorBase& self) const override {
    return upstream_->variable_data(self);
  }
  const c10::intrusive_ptr<torch::autograd::Node>& grad_fn(const at::TensorBase& self) const override {
    return upstream_->grad_fn(self);
  }
  unsigned _register_hook(const at::TensorBase& self,
                          std::function<at::TensorBase(const at::TensorBase&)> hook) const override {
    return upstream_->_register_hook(self, std::move(hook));
  }
  void remove_hook(const at::TensorBase& self, unsigned pos) const override { upstream_->remove_hook(self, pos); }
  bool is_view(const at::TensorBase& self) const override { return upstream_->is_view(self); }
  const at::TensorBase& base(const at::TensorBase& self) const override { return upstream_->base(self); }
  const std::string& name(const at::TensorBase& self) const override { return upstream_->name(self); }
  bool is_leaf(const at::TensorBase& self) const override { return upstream_->is_leaf(self); }
  int64_t output_nr(const at::TensorBase& self) const override { return upstream_->output_nr(self); }
  at::TensorBase data(const at::TensorBase& self) const override { return upstream_->data(self); }
  int64_t _version(const at::TensorBase& self) const override { return upstream_->_version(self); }
  void retain_grad(const at::TensorBase& self) const override { upstream_->retain_grad(self); }
  bool retains_grad(const at::TensorBase& self) const override { return upstream_->retains_grad(self); }
  void _backward(const at::Tensor& self, at::TensorList inputs, const std::optional<at::Tensor>& gradient,
                 std::optional<bool> keep_graph, bool create_graph) const override {
    upstream_->_backward(self, inputs, gradient, keep_graph, create_graph);
  }
  void requires_grad_(const at::TensorBase& self, bool requires_grad) const override {
    upstream_->requires_grad_(self, requires_grad);
  }
  void basic_autograd_not_implemented_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet dispatch_keys,
                                               torch::jit::Stack* stack) const override {
    upstream_->basic_autograd_not_implemented_fallback(op, dispatch_keys, stack);
  }
  std::optional<c10::ScalarType> grad_dtype(const at::TensorBase& self) const override {
    return upstream_->grad_dtype(self);
  }
  void set_grad_dtype(const at::TensorBase& self, const std::optional<c10::ScalarType>& dtype) const override {
    upstream_->set_grad_dtype(self, dtype);
  }

 private:
  at::impl::VariableHooksInterface* upstream_;
};

}  // namespace

void register_shallow_copy_compatibility() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Both live for the life of the process, like torch's own hooks.
    static BridgingVariableHooks hooks(at::impl::GetVariableHooks());
    at::impl::SetVariableHooks(&hooks);
    // Python's torch._has_compatible_shallow_copy_type dispatches on the
    // union of both key sets, where PrivateUse1 is the highest backend.
    for (const c10::DispatchKey key : {c10::DispatchKey::AutogradPrivateUse1, c10::DispatchKey::PrivateUse1}) {
      auto* library = new torch::Library(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
      library->impl("_has_compatible_shallow_copy_type", TORCH_FN(compatible_shallow_copy_type));
    }
  });
}

}  // namespace torchplug
