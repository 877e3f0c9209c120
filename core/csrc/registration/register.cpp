#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

#include <torch/library.h>

#include "backend/backend.h"
#include "kernels/cpu_fallback.h"
#include "memory/device_allocator.h"
#include "device/device_guard.h"
#include "memory/host_alias.h"
#include "memory/host_allocator.h"
#include "registration/kernels.h"
#include "registration/library_registry.h"
#include "memory/sparse_alias.h"

namespace torchplug {
namespace {

// Where the CPU overrides a composite kernel, a device would run the
// composite: for sparse tensors (clone, copy_, empty_like, ...) a dense
// decomposition that fails; for dense ones another algorithm than the CPU's
// (native_group_norm, native_layer_norm, _softmax decompose into a dozen
// operators and round differently) or a functional variant that allocates
// its output and calls the out= variant. These operators go to the CPU
// fallback instead, which runs the CPU's own kernel over the device memory.
struct OverriddenComposites {
  std::vector<c10::OperatorName> dense;       // CPU overrides
  std::vector<c10::OperatorName> coo;         // SparseCPU overrides
  std::vector<c10::OperatorName> compressed;  // SparseCsrCPU overrides
};

const OverriddenComposites& overridden_composites() {
  static const OverriddenComposites found = [] {
    OverriddenComposites result;
    c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
    constexpr std::string_view aten = "aten::";
    for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
      if (name.name.compare(0, aten.size(), aten) != 0) {
        continue;
      }
      const std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
      if (!op.has_value() || !(op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
                               op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))) {
        continue;
      }
      if (op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
        result.dense.push_back(name);
      }
      if (op->hasKernelForDispatchKey(c10::DispatchKey::SparseCPU)) {
        result.coo.push_back(name);
      }
      if (op->hasKernelForDispatchKey(c10::DispatchKey::SparseCsrCPU)) {
        result.compressed.push_back(name);
      }
    }
    return result;
  }();
  return found;
}

void route_to_fallback(torch::Library& library, c10::DispatchKey key, const std::vector<c10::OperatorName>& names) {
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : names) {
    if (dispatcher.findOp(name)->hasKernelForDispatchKey(key)) {
      continue;  // a device kernel of ours stays
    }
    // The library's namespace is aten: register by the unqualified name.
    std::string unqualified = name.name.substr(name.name.find("::") + 2);
    if (!name.overload_name.empty()) {
      unqualified += "." + name.overload_name;
    }
    library.impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&aliasing_cpu_fallback>());
  }
}

// Composites (CompositeImplicitAutograd) that call the CPU's loops through a
// DispatchStub with the tensors' device type, which has no slot for every
// device type (HPU's): torch.load validates loaded sparse tensors with them.
// They run over host aliases instead, as the CPU's.
constexpr std::array<const char*, 6> kStubCallingComposites{
    "_validate_sparse_coo_tensor_args", "_validate_sparse_compressed_tensor_args",
    "_validate_sparse_csr_tensor_args", "_validate_sparse_csc_tensor_args",
    "_validate_sparse_bsr_tensor_args", "_validate_sparse_bsc_tensor_args"};

void route_stub_calling_composites(torch::Library& library) {
  for (const char* name : kStubCallingComposites) {
    library.impl(name, torch::CppFunction::makeFromBoxedFunction<&aliasing_cpu_fallback>());
  }
}

}  // namespace

void register_factory_kernels(torch::Library& library);
void register_copy_kernels(torch::Library& library);
void register_native_kernels(torch::Library& library);
void register_host_kernels(torch::Library& library);
void register_recurrent_kernels(torch::Library& library);
void register_math_bit_copies();

void register_kernels(const BackendIdentity& backend) {
  register_math_bit_copies();
  register_once(backend.type, [&backend] {
    const c10::DispatchKey key = backend.key;
    const c10::DispatchKey coo_key = backend.sparse_key;
    const c10::DispatchKey compressed_key = backend.sparse_csr_key;
    auto kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    register_factory_kernels(*kernels);
    register_copy_kernels(*kernels);
    register_native_kernels(*kernels);
    register_host_kernels(*kernels);
    register_recurrent_kernels(*kernels);
    auto coo = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", coo_key, __FILE__, __LINE__);
    auto compressed =
        std::make_unique<torch::Library>(torch::Library::IMPL, "aten", compressed_key, __FILE__, __LINE__);
    register_sparse_kernels(*coo, *compressed);
    route_to_fallback(*kernels, key, overridden_composites().dense);
    route_stub_calling_composites(*kernels);
    route_to_fallback(*coo, coo_key, overridden_composites().coo);
    route_to_fallback(*compressed, compressed_key, overridden_composites().compressed);
    Libraries libraries;
    libraries.push_back(std::move(kernels));
    libraries.push_back(std::move(coo));
    libraries.push_back(std::move(compressed));
    // Dense and sparse operators without a device kernel run the CPU's.
    for (const c10::DispatchKey fallback_key : {key, coo_key, compressed_key}) {
      auto fallback = std::make_unique<torch::Library>(torch::Library::IMPL, "_", fallback_key, __FILE__, __LINE__);
      fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&aliasing_cpu_fallback>());
      libraries.push_back(std::move(fallback));
    }
    return libraries;
  });
}

}  // namespace torchplug
