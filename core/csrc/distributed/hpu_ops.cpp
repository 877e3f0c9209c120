// Upstream registers the c10d op kernels (c10d::allreduce_, ...) for CPU,
// CUDA and PrivateUse1 only, each hard-wired to its own device type's backend.
// For HPU tensors one boxed kernel serves every op: it hands the PrivateUse1
// kernel a view of the process group whose PrivateUse1 slot holds the group's
// HPU backend, so the op's argument handling stays upstream's.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/library.h>

namespace torchplug::distributed {
namespace {

c10::intrusive_ptr<c10d::ProcessGroup> with_hpu_backend_as_privateuse1(c10d::ProcessGroup& group) {
  c10::intrusive_ptr<c10d::Backend> backend = group.getBackend(c10::DeviceType::HPU);
  auto view = c10::make_intrusive<c10d::ProcessGroup>(backend->getRank(), backend->getSize());
  view->setBackend(c10::DeviceType::PrivateUse1, c10d::ProcessGroup::BackendType::CUSTOM, backend);
  return view;
}

void run_on_hpu_backend(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  for (size_t index = 0; index < arguments.size(); ++index) {
    if (arguments[index].name() == "process_group") {
      c10::IValue& slot = (*stack)[first + index];
      slot = c10::IValue(with_hpu_backend_as_privateuse1(*slot.toCustomClass<c10d::ProcessGroup>()));
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

TORCH_LIBRARY_IMPL(c10d, HPU, m) {
  for (const char* name :
       {"send", "recv_", "recv_any_source_", "reduce_", "broadcast_", "allreduce_", "allreduce_coalesced_",
        "allgather_", "_allgather_base_", "allgather_coalesced_", "allgather_into_tensor_coalesced_",
        "reduce_scatter_", "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_", "gather_", "scatter_",
        "alltoall_", "alltoall_base_", "barrier"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_on_hpu_backend>());
  }
}

}  // namespace
}  // namespace torchplug::distributed
