#include "kernels/cpu_fallback.h"

#include <chrono>
#include <cstdint>
#include <string>

#include <ATen/core/op_registration/adaption.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/SmallVector.h>
#include <c10/util/StringUtil.h>

#include "backend/backend.h"
#include "device/generator.h"
#include "kernels/fallback_report.h"
#include "kernels/operator_arguments.h"
#include "kernels/queued_host_call.h"
#include "memory/host_alias.h"
#include "memory/host_mirror.h"
#include "launch/kernel_launch.h"
#include "memory/sparse_alias.h"
#include "driver/memory_access.h"
#include "registration/kernels.h"

namespace torchplug {
namespace {

// One device tensor handed to the kernel as a host tensor: an alias of its
// memory, or a copy of it (a mirror) where the host cannot address it.
struct Aliased {
  at::Tensor original;
  at::Tensor alias;
  c10::StorageImpl* alias_storage;  // as given to the kernel; null for sparse tensors
  bool mutable_arg;

  bool strided() const { return alias_storage != nullptr; }
};

// A host tensor the kernel would write (an out= or in-place argument).
struct WrittenHostTensor {
  at::Tensor tensor;
  const char* argument;
};

struct CallState {
  const c10::OperatorHandle& op;
  KernelDevice operands;          // the arguments' devices
  c10::Device device{c10::kCPU};  // the device the call runs on, once found
  // The device's memory is copied to and from the host (a discrete device)
  // rather than aliased.
  bool copying = false;
  HostAliases host_aliases;  // views of one device storage share a host storage
  HostMirrors mirrors;       // the same, for copies
  c10::SmallVector<Aliased, 4> aliased;
  c10::SmallVector<WrittenHostTensor, 1> written_on_host;
  bool has_generator_arg = false;
  int generator_slot = -1;
  bool sparse_kernel = false;  // the call runs a SparseCPU or SparseCsrCPU kernel
};

void note_device(CallState& state, const at::Tensor& tensor, const c10::Argument& argument) {
  if (!(tensor.device().is_cpu() && host_index_argument(argument, tensor))) {
    state.operands.note(tensor);
  }
}

// A few sparse CPU kernels read autograd state (sparse.mm with a reduction
// saves what its backward needs only when an input requires grad), so their
// aliases say what the device tensors say. Dense calls skip it: marking an
// alias allocates its autograd metadata, a cost on every training op.
at::Tensor mirror_requires_grad(const CallState& state, const at::Tensor& original, at::Tensor alias) {
  if (state.sparse_kernel && original.requires_grad()) {
    alias.unsafeGetTensorImpl()->set_requires_grad(true);
  }
  return alias;
}

// Layouts only the CPU has (oneDNN's opaque tensors) exist on no simulated
// device: a device tensor never has one, and a CPU kernel's result with one
// cannot become a device tensor.
bool device_layout(const at::Tensor& tensor) {
  return tensor.layout() == c10::kStrided || is_sparse_layout(tensor);
}

void check_device_layout(const CallState& state, const at::Tensor& tensor) {
  TORCH_CHECK_NOT_IMPLEMENTED(device_layout(tensor), "Cannot run ", state.op.schema().name(), " on ",
                              tensor.device(), ": the tensor has layout ", tensor.layout(),
                              ", which simulated devices do not support.");
}

// A CPU kernel's result the device cannot hold: a layout or a kind of
// tensor (oneDNN, quantized, nested) that exists only on the CPU.
void check_result_fits_device(const CallState& state, const at::Tensor& result) {
  const bool cpu_only = !device_layout(result) || result.is_quantized() || result.is_nested();
  if (!cpu_only) {
    return;
  }
  const std::string kind = result.is_quantized() ? "a quantized tensor"
                           : result.is_nested()  ? "a nested tensor"
                                                 : c10::str("a tensor of layout ", result.layout());
  TORCH_CHECK_NOT_IMPLEMENTED(false, state.op.schema().name(), " is not supported on ", state.device, ": it makes ",
                              kind, ", which exists only on the CPU. Move the input to the CPU first, e.g. ",
                              "x.cpu() before calling it, and move the result back with .to(\"",
                              state.device.type(), "\") where a dense tensor will do.");
}

bool is_written(const c10::Argument& argument) {
  return argument.alias_info() != nullptr && argument.alias_info()->isWrite();
}

// An argument a CPU kernel writes though its schema does not say so:
// native_batch_norm updates `Tensor? running_mean` and `running_var` in
// training. Aliases see the write in place; copies must be copied back.
bool written_undeclared(const c10::OperatorHandle& op, const c10::Argument& argument) {
  return op.schema().name() == "aten::native_batch_norm" &&
         (argument.name() == "running_mean" || argument.name() == "running_var");
}

at::Tensor to_host(CallState& state, const at::Tensor& tensor, const c10::Argument& argument) {
  if (!tensor.defined()) {
    return tensor;
  }
  const bool is_mutable = is_written(argument) || (state.copying && written_undeclared(state.op, argument));
  note_device(state, tensor, argument);
  if (tensor.device().is_cpu()) {
    if (is_mutable && !writes_across_devices(state.op)) {
      // Checked once the call's device is known: a host out= would have the
      // kernel write host memory and the result adopted as device memory.
      state.written_on_host.push_back({tensor, argument.name().c_str()});
    }
    return tensor;
  }
  TORCH_CHECK(find_device_runtime(tensor.device().type()) != nullptr, "Cannot run ", state.op.schema().name(),
              " on ", tensor.device(), ": no torchplug backend serves that device.");
  check_device_layout(state, tensor);
  if (state.copying) {
    TORCH_CHECK_NOT_IMPLEMENTED(!is_sparse_layout(tensor), "Cannot run ", state.op.schema().name(), " on ",
                                tensor.device(), ": sparse tensors are not supported yet on a device whose memory ",
                                "the host cannot address. Use a dense tensor (.to_dense()), or compute on the CPU.");
    at::Tensor copy = state.mirrors.mirror(tensor);
    state.aliased.push_back({tensor, copy, copy.storage().unsafeGetStorageImpl(), is_mutable});
    return copy;
  }
  if (is_sparse_layout(tensor)) {
    // Its parts are aliased like any device tensor, so results that view
    // them map back to the device parts.
    at::Tensor alias = sparse_host_alias(tensor, [&state](const at::Tensor& part) {
      at::Tensor part_alias = state.host_aliases.alias(part);
      state.aliased.push_back({part, part_alias, part_alias.storage().unsafeGetStorageImpl(), false});
      return part_alias;
    });
    state.aliased.push_back({tensor, alias, nullptr, is_mutable});
    return mirror_requires_grad(state, tensor, alias);
  }
  at::Tensor alias = state.host_aliases.alias(tensor);
  state.aliased.push_back({tensor, alias, alias.storage().unsafeGetStorageImpl(), is_mutable});
  return mirror_requires_grad(state, tensor, alias);
}

c10::IValue convert_argument(CallState& state, const c10::Argument& argument, c10::IValue value) {
  if (value.isTensor()) {
    return to_host(state, value.toTensor(), argument);
  }
  if (value.isTensorList()) {
    auto list = value.toTensorList();
    c10::List<at::Tensor> converted;
    converted.reserve(list.size());
    for (const at::Tensor& tensor : list) {
      converted.push_back(to_host(state, tensor, argument));
    }
    return converted;
  }
  if (value.isList() && value.toListRef().size() > 0 &&
      argument.type()->kind() == c10::TypeKind::ListType) {
    // List[Optional[Tensor]] (indexing).
    auto elements = value.toList();
    if (!elements.elementType()->isSubtypeOf(*c10::OptionalType::ofTensor())) {
      return value;
    }
    c10::List<std::optional<at::Tensor>> converted;
    for (const c10::IValue& element : elements) {
      if (element.isTensor()) {
        converted.push_back(to_host(state, element.toTensor(), argument));
      } else {
        converted.push_back(std::nullopt);
      }
    }
    return converted;
  }
  if (value.isDevice() && !value.toDevice().is_cpu()) {
    const c10::Device device = value.toDevice();
    if (find_device_runtime(device.type()) != nullptr) {
      const c10::Device indexed(device.type(), checked_device_index(device.type(), device.index()));
      if (!state.operands.found()) {
        state.operands.note(indexed);
      }
      return c10::IValue(c10::Device(c10::kCPU));
    }
  }
  if (argument.type()->kind() == c10::TypeKind::OptionalType &&
      argument.type()->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType) {
    state.has_generator_arg = true;
    if (value.isGenerator()) {
      const at::Generator& generator = value.toGenerator();
      if (!generator.device().is_cpu()) {
        return c10::IValue(engine_of(generator));
      }
    }
  }
  return value;
}

// Calls `visit` on every tensor `value` holds (a tensor, a list of tensors, a
// list of optional tensors).
template <typename Visit>
void for_each_tensor(const c10::IValue& value, const Visit& visit) {
  if (value.isTensor()) {
    visit(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorList()) {
      visit(tensor);
    }
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) {
      if (element.isTensor()) {
        visit(element.toTensor());
      }
    }
  }
}

// The argument a kernel's result is (in-place and out= return their
// argument), or null for a new tensor.
const Aliased* returned_argument(const CallState& state, const at::Tensor& result) {
  for (const Aliased& entry : state.aliased) {
    if (result.unsafeGetTensorImpl() == entry.alias.unsafeGetTensorImpl()) {
      return &entry;
    }
  }
  return nullptr;
}

// A kernel's result as the device tensor the caller should see.
at::Tensor to_device(const CallState& state, const at::Tensor& result) {
  if (!result.defined() || !result.device().is_cpu()) {
    return result;
  }
  if (const Aliased* argument = returned_argument(state, result)) {
    return argument->original;
  }
  check_result_fits_device(state, result);
  if (state.copying) {
    TORCH_CHECK_NOT_IMPLEMENTED(!is_sparse_layout(result), state.op.schema().name(), " makes a sparse tensor, which ",
                                "is not supported yet on ", state.device, ", a device whose memory the host cannot ",
                                "address. Compute it on the CPU.");
    const at::Tensor view = state.mirrors.device_view_of(result);
    return view.defined() ? view : upload_to_device(result, state.device);
  }
  if (is_sparse_layout(result)) {
    return sparse_to_device(result, state.device, [&state](const at::Tensor& part) { return to_device(state, part); });
  }
  for (const Aliased& entry : state.aliased) {
    if (entry.strided() && result.storage().unsafeGetStorageImpl() == entry.alias.storage().unsafeGetStorageImpl()) {
      return device_view(entry.original.storage(), result, entry.original.key_set());
    }
  }
  return adopt_host_tensor(result, state.device);
}

// Writes back what a kernel did to a mutable argument's metadata (resize,
// reallocation) onto the device tensor it stands for.
void sync_mutated(CallState& state, const Aliased& entry) {
  const at::Tensor& alias = entry.alias;
  if (state.copying) {
    state.mirrors.write_back(entry.original, alias);
    return;
  }
  if (!entry.strided()) {
    sync_sparse(alias, entry.original, [&state](const at::Tensor& part) { return to_device(state, part); });
    return;
  }
  c10::TensorImpl* original = entry.original.unsafeGetTensorImpl();
  if (alias.storage().unsafeGetStorageImpl() != entry.alias_storage) {
    TORCH_CHECK(false, "Kernel replaced the storage of a mutable argument; not supported on simulated devices.");
  }
  if (alias.storage().data() != entry.original.storage().data()) {
    adopt_host_storage(alias.storage(), entry.original.storage());
  }
  if (alias.sizes() != entry.original.sizes() || alias.strides() != entry.original.strides() ||
      alias.storage_offset() != entry.original.storage_offset()) {
    original->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
  }
}

// An operator with a kernel for CUDA alone (or for no device) reaches the
// fallback, which has no CPU kernel to run: say so, rather than the
// dispatcher's "Could not run ... with arguments from the 'CPU' backend".
void check_cpu_kernel_exists(const c10::OperatorHandle& op, c10::DispatchKeySet cpu_keys, c10::Device device) {
  const c10::DispatchKey cpu_key = cpu_keys.highestPriorityTypeId();
  if (op.hasComputedKernelForDispatchKey(cpu_key)) {
    return;
  }
  const bool dense = cpu_key == c10::DispatchKey::CPU;
  const c10::DispatchKey cuda_key = dense                                     ? c10::DispatchKey::CUDA
                                    : cpu_key == c10::DispatchKey::SparseCPU ? c10::DispatchKey::SparseCUDA
                                                                             : c10::DispatchKey::SparseCsrCUDA;
  const bool cuda = op.hasKernelForDispatchKey(cuda_key);
  if (!dense && !cuda) {
    // No device has it for this layout (a view of a sparse tensor): the
    // CPU's own error says so, as it does for sparse CPU tensors.
    return;
  }
  const std::string device_name = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "Operator ", op.schema().name(), " has no kernel for ", device, " (", dense ? "dense" : "sparse",
      " tensors)", cuda ? ": it has a CUDA kernel only" : "",
      ", and torchplug's CPU fallback cannot run it because the CPU has no kernel for it either. "
      "Run it on a device that supports it (move its inputs there with .to()), or register a kernel for ",
      device_name, " with torch.library.impl(\"", op.schema().name(), "\", \"",
      device.type() == c10::DeviceType::HPU ? "HPU" : "PrivateUse1", "\").");
}

// The CPU key of the functionality the call was dispatched for: dense
// arguments run CPU kernels, sparse ones SparseCPU's.
c10::DispatchKeySet host_keys(c10::DispatchKeySet keys) {
  switch (c10::toFunctionalityKey(keys.highestPriorityTypeId())) {
    case c10::DispatchKey::Sparse:
      return c10::DispatchKeySet(c10::DispatchKey::SparseCPU);
    case c10::DispatchKey::SparseCsr:
      return c10::DispatchKeySet(c10::DispatchKey::SparseCsrCPU);
    default:
      return c10::DispatchKeySet(c10::DispatchKey::CPU);
  }
}

// What the fallback report counts of a result: the bytes of a new dense
// tensor; a returned argument was counted as an argument.
uint64_t result_bytes(const CallState& state, const at::Tensor& result) {
  const bool counted = !result.defined() || result.layout() != c10::kStrided || returned_argument(state, result);
  return counted ? 0 : result.nbytes();
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  run_cpu_kernel(op, keys, stack, ActivityKind::kFallbackKernel);
}

void run_cpu_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack,
                    ActivityKind kind) {
  const c10::DeviceType type = c10::dispatchKeyToDeviceType(keys.highestPriorityTypeId());
  if (!kernels_registered(type)) {
    // The device's first operator (a factory given only the device): it may
    // have a kernel of the device once they are registered.
    ensure_kernels_registered(type);
    op.redispatchBoxed(keys, stack);
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  const c10::DispatchKeySet cpu_keys = host_keys(keys);
  const bool reported = kind == ActivityKind::kFallbackKernel;
  HostCallQueued queued = queue_host_call(op, cpu_keys, stack, kind);
  if (queued.outcome == HostCallQueueing::kQueued) {
    if (reported) {
      count_fallback(op, queued.device, queued.bytes, std::chrono::steady_clock::now() - started);
    }
    return;
  }
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t num_arguments = arguments.size();
  const size_t first = stack->size() - num_arguments;
  CallState state{op, KernelDevice(schema.name().c_str())};
  state.sparse_kernel = cpu_keys != c10::DispatchKeySet(c10::DispatchKey::CPU);
  state.copying = !backend(type).host_addressable;
  if (state.copying) {
    // The spans of device memory the call uses, before any is mirrored.
    for (size_t i = 0; i < num_arguments; ++i) {
      for_each_tensor((*stack)[first + i], [&state](const at::Tensor& tensor) { state.mirrors.note(tensor); });
    }
  }

  for (size_t i = 0; i < num_arguments; ++i) {
    c10::IValue& slot = (*stack)[first + i];
    slot = convert_argument(state, arguments[i], std::move(slot));
    if (state.has_generator_arg && state.generator_slot < 0) {
      state.generator_slot = static_cast<int>(i);
    }
  }
  state.device = state.operands.device();
  for (const WrittenHostTensor& written : state.written_on_host) {
    // What CUDA's generated device checks say for a host out= argument.
    c10::impl::common_device_check_failure(state.device, written.tensor, schema.name().c_str(), written.argument);
  }
  check_cpu_kernel_exists(op, cpu_keys, state.device);

  // Random ops without an explicit generator draw from the device's default one.
  if (state.generator_slot >= 0 && (*stack)[first + state.generator_slot].isNone()) {
    (*stack)[first + state.generator_slot] = c10::IValue(engine_of(default_generator(state.device)));
  }

  uint64_t bytes = 0;
  {
    std::vector<const void*> accessed;
    for (const Aliased& entry : state.aliased) {
      if (entry.strided()) {
        bytes += entry.original.nbytes();
        if (driver::strict_memory() && !state.copying) {
          accessed.push_back(entry.original.storage().data());
        }
      }
    }
    // An operator whose results' sizes depend on the data waits for it, as on
    // CUDA: a wait the program asked for.
    const bool waits_for_data = queued.outcome == HostCallQueueing::kWaitsForData;
    const KernelLaunch launch(schema.name().c_str(), state.device, accessed,
                              {kind, std::nullopt, waits_for_data, HostWait::kDataDependent});
    if (state.copying) {
      state.mirrors.download();
    }
    op.redispatchBoxed(cpu_keys, stack);
    for (const Aliased& entry : state.aliased) {
      if (entry.mutable_arg) {
        sync_mutated(state, entry);
      }
    }
  }

  const size_t num_returns = schema.returns().size();
  const size_t returns_begin = stack->size() - num_returns;
  for (size_t i = 0; i < num_returns; ++i) {
    c10::IValue& result = (*stack)[returns_begin + i];
    if (result.isTensor()) {
      bytes += result_bytes(state, result.toTensor());
      result = to_device(state, result.toTensor());
    } else if (result.isTensorList()) {
      auto list = result.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        // Taken out of the list, a fresh result is held once and is adopted
        // rather than copied (see adopt_host_tensor).
        const at::Tensor element = list.extract(j);
        bytes += result_bytes(state, element);
        list.set(j, to_device(state, element));
      }
    }
  }
  if (queued.learn.has_value()) {
    learn_result_shapes(op, *std::move(queued.learn), *stack);
  }
  if (reported) {
    count_fallback(op, state.device, bytes, std::chrono::steady_clock::now() - started);
  }
}

}  // namespace torchplug
