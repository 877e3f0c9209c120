#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

#include <torch/library.h>

#include "backend/backend.h"
#include "kernels/cpu_fallback.h"
#include "kernels/device_kernel_calls.h"
#include "memory/device_allocator.h"
#include "device/device_guard.h"
#include "memory/host_alias.h"
#include "memory/host_allocator.h"
#include "registration/autocast.h"
#include "registration/device_kernels.h"
#include "registration/kernels.h"
#include "registration/library_registry.h"
#include "memory/sparse_alias.h"

namespace torchplug {
namespace {

// An operator with a sparse CPU kernel, and whether that kernel overrides a
// composite (see below).
struct SparseOperator {
  c10::OperatorName name;
  bool overrides_composite;
};

// Where the CPU overrides a composite kernel, a device would run the
// composite: for sparse tensors (clone, copy_, empty_like, ...) a dense
// decomposition that fails; for dense ones another algorithm than the CPU's
// (native_group_norm, native_layer_norm, _softmax decompose into a dozen
// operators and round differently) or a functional variant that allocates
// its output and calls the out= variant. These operators go to the CPU
// fallback instead, which runs the CPU's own kernel over the device memory
// (or over copies of it).
struct CpuKernelOperators {
  std::vector<c10::OperatorName> dense_overrides;  // aten operators whose CPU kernel overrides a composite
  std::vector<SparseOperator> coo;                 // every operator with a SparseCPU kernel
  std::vector<SparseOperator> compressed;          // every operator with a SparseCsrCPU kernel
};

// Found once, for every backend: a scan of the dispatcher's operators.
const CpuKernelOperators& cpu_kernel_operators() {
  static const CpuKernelOperators found = [] {
    CpuKernelOperators result;
    c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
    constexpr std::string_view aten = "aten::";
    for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
      const std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
      if (!op.has_value()) {
        continue;
      }
      const bool overrides_composite =
          name.name.compare(0, aten.size(), aten) == 0 &&
          (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
           op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional));
      if (overrides_composite && op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
        result.dense_overrides.push_back(name);
      }
      if (op->hasKernelForDispatchKey(c10::DispatchKey::SparseCPU)) {
        result.coo.push_back({name, overrides_composite});
      }
      if (op->hasKernelForDispatchKey(c10::DispatchKey::SparseCsrCPU)) {
        result.compressed.push_back({name, overrides_composite});
      }
    }
    return result;
  }();
  return found;
}

// What a library of the operator's namespace registers it by.
std::string unqualified_name(const c10::OperatorName& name) {
  std::string unqualified = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) {
    unqualified += "." + name.overload_name;
  }
  return unqualified;
}

// A device kernel of ours, or one a user gave, stays (DeviceKernels).
void route_to_fallback(DeviceKernels& library, const std::vector<c10::OperatorName>& names) {
  for (const c10::OperatorName& name : names) {
    library.impl(unqualified_name(name).c_str(), torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
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

void route_stub_calling_composites(DeviceKernels& library) {
  for (const char* name : kStubCallingComposites) {
    library.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  }
}

// A sparse operator without a device kernel runs the CPU's sparse kernel, for
// the operators the CPU has one for: registered one by one rather than as a
// backend fallback, which the dispatcher applies to every operator (thousands)
// and which made each sparse dispatch key cost milliseconds of `import torch`.
// A kernel of ours stays, and so does a composite the CPU does not override;
// an operator the CPU has no sparse kernel for fails as it does on the CPU.
Libraries route_sparse_to_fallback(c10::DispatchKey key, const std::vector<SparseOperator>& operators) {
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  std::map<std::string, std::unique_ptr<torch::Library>> by_namespace;
  for (const auto& [name, overrides_composite] : operators) {
    const std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
    if (!op.has_value() || op->hasKernelForDispatchKey(key) ||
        (!overrides_composite && op->hasComputedKernelForDispatchKey(key))) {
      continue;
    }
    const size_t separator = name.name.find("::");
    const std::string ns = name.name.substr(0, separator);
    std::unique_ptr<torch::Library>& library = by_namespace[ns];
    if (library == nullptr) {
      library = std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__, __LINE__);
    }
    library->impl(unqualified_name(name).c_str(), torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  }
  Libraries libraries;
  for (auto& [ns, library] : by_namespace) {
    libraries.push_back(std::move(library));
  }
  return libraries;
}

}  // namespace

void register_factory_kernels(torch::Library& library);
void register_copy_kernels(DeviceKernels& library);
void register_native_kernels(DeviceKernels& library);
void register_queued_foreach_kernels(DeviceKernels& library);
void register_host_kernels(DeviceKernels& library);
void register_direct_loop_kernels(DeviceKernels& library);
void register_recurrent_kernels(DeviceKernels& library);
void register_device_module_kernels(DeviceKernels& library);
void register_math_bit_copies();

namespace {

// Per device type: whether ensure_kernels_registered has run. Read on every
// device allocation, so the check is one acquire load.
std::array<std::atomic<bool>, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)> kernels_ready{};

// What a device type's first tensor needs: every other kernel of the device,
// the routes of the operators the CPU overrides a composite for, the sparse
// routes, and autocast.
void register_deferred_kernels(const BackendIdentity& backend) {
  register_once(backend.type, [&backend] {
    const c10::DispatchKey key = backend.key;
    auto kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    DeviceKernels device_kernels(*kernels, key);
    register_copy_kernels(device_kernels);
    if (!backend.host_addressable && has_module_kernels(backend.type)) {
      // Kernels the device runs itself (the core's device-kernel module,
      // loaded through the driver); registered first, so the host kernels
      // below keep the operators they cover only for the others.
      register_device_module_kernels(device_kernels);
    }
    register_recurrent_kernels(device_kernels);  // ATen operators on the device tensors: any device
    register_host_kernels(device_kernels);       // over host aliases, or through the copying fallback
    if (backend.host_addressable) {
      // Kernels that run the CPU's loops over device memory in place; on a
      // device whose memory the host cannot address, their operators take
      // the fallback, which copies.
      register_native_kernels(device_kernels);
      register_queued_foreach_kernels(device_kernels);
      register_direct_loop_kernels(device_kernels);
    }
    route_to_fallback(device_kernels, cpu_kernel_operators().dense_overrides);
    route_stub_calling_composites(device_kernels);
    Libraries libraries;
    libraries.push_back(std::move(kernels));
    for (auto& [sparse_key, operators] : {std::pair{backend.sparse_key, &cpu_kernel_operators().coo},
                                          std::pair{backend.sparse_csr_key, &cpu_kernel_operators().compressed}}) {
      for (auto& library : route_sparse_to_fallback(sparse_key, *operators)) {
        libraries.push_back(std::move(library));
      }
    }
    return libraries;
  });
  register_autocast(backend);
}

}  // namespace

void register_kernels(const BackendIdentity& backend) {
  register_math_bit_copies();
  register_once(backend.type, [&backend] {
    const c10::DispatchKey key = backend.key;
    auto factories = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    register_factory_kernels(*factories);
    auto coo =
        std::make_unique<torch::Library>(torch::Library::IMPL, "aten", backend.sparse_key, __FILE__, __LINE__);
    auto compressed =
        std::make_unique<torch::Library>(torch::Library::IMPL, "aten", backend.sparse_csr_key, __FILE__, __LINE__);
    register_sparse_kernels(*coo, *compressed);
    // Dense operators without a device kernel run the CPU's. Registered now:
    // a factory given only a device (torch.randperm(5, device=...)) reaches
    // it before any tensor of the device exists.
    auto fallback = std::make_unique<torch::Library>(torch::Library::IMPL, "_", key, __FILE__, __LINE__);
    fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
    Libraries libraries;
    libraries.push_back(std::move(factories));
    libraries.push_back(std::move(coo));
    libraries.push_back(std::move(compressed));
    libraries.push_back(std::move(fallback));
    return libraries;
  });
}

bool kernels_registered(c10::DeviceType type) {
  return kernels_ready[static_cast<size_t>(type)].load(std::memory_order_acquire);
}

void ensure_kernels_registered(c10::DeviceType type) {
  if (kernels_registered(type)) {
    return;
  }
  register_deferred_kernels(backend(type));
  kernels_ready[static_cast<size_t>(type)].store(true, std::memory_order_release);
}

}  // namespace torchplug
