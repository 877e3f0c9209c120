#include "kernels/queued_host_call.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/SmallVector.h>
#include <c10/util/StringUtil.h>

#include "backend/backend.h"
#include "device/generator.h"
#include "driver/stream.h"
#include "kernels/call_shapes.h"
#include "kernels/operator_arguments.h"
#include "launch/kernel_launch.h"
#include "memory/host_alias.h"

namespace torchplug {
namespace {

enum class SchemaFit {
  kQueueable,
  kRunsNow,
  kWaitsForData,
  // Indexing: its result's shape follows from integer indices' shapes, and
  // from the data of a boolean mask's.
  kQueueableUnlessMasked,
};

// Whether an index argument is a boolean (or byte) mask.
bool has_mask(const c10::IValue& indices) {
  for (const c10::IValue& index : indices.toListRef()) {
    if (index.isTensor() && (index.toTensor().scalar_type() == at::kBool || index.toTensor().scalar_type() == at::kByte)) {
      return true;
    }
  }
  return false;
}

bool is_generator(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) {
    return true;
  }
  const auto* optional = type->castRaw<c10::OptionalType>();
  return optional != nullptr && optional->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// Which argument is the operator's generator, if it takes one.
std::optional<size_t> generator_argument(const c10::FunctionSchema& schema) {
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (is_generator(arguments[i].type())) {
      return i;
    }
  }
  return std::nullopt;
}

bool is_tensor_or_tensor_list(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) {
    return true;
  }
  const auto* list = type->castRaw<c10::ListType>();
  return list != nullptr && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

SchemaFit fit_of_schema(const c10::OperatorHandle& op) {
  if (op.schema().operator_name() == c10::OperatorName("aten::index", "Tensor")) {
    return SchemaFit::kQueueableUnlessMasked;
  }
  if (op.hasTag(at::Tag::data_dependent_output) || op.hasTag(at::Tag::dynamic_output_shape)) {
    return SchemaFit::kWaitsForData;
  }
  const c10::FunctionSchema& schema = op.schema();
  // Only ATen's CPU kernels are known to be C++, which a stream's worker may
  // run (it never enters Python: the host may hold the GIL while it waits).
  // A meta kernel cannot read data: an operator with one has results whose
  // shapes follow from the signature (call_shapes.h).
  const bool aten = schema.name().rfind("aten::", 0) == 0;
  if (!aten || !op.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta) || writes_across_devices(op)) {
    return SchemaFit::kRunsNow;
  }
  // A random operator queues only when it takes its generator as an argument
  // (the queued call draws from the device's); one that draws from the CPU's
  // default generator on its own runs now.
  if (op.hasTag(at::Tag::nondeterministic_seeded) && !generator_argument(schema).has_value()) {
    return SchemaFit::kRunsNow;
  }
  for (const c10::Argument& argument : schema.arguments()) {
    const c10::AliasInfo* alias = argument.alias_info();
    const bool view_or_written_list =
        alias != nullptr && (!alias->isWrite() || argument.type()->kind() != c10::TypeKind::TensorType);
    if (view_or_written_list) {
      return SchemaFit::kRunsNow;
    }
  }
  for (const c10::Argument& result : schema.returns()) {
    const c10::AliasInfo* alias = result.alias_info();
    if (!is_tensor_or_tensor_list(result.type()) || (alias != nullptr && !alias->isWrite())) {
      return SchemaFit::kRunsNow;
    }
  }
  return SchemaFit::kQueueable;
}

// The out= overload of an operator whose results are all new tensors: the
// operator's arguments followed by one written tensor per result. A queued
// call through it writes its results into the outputs directly, where the
// functional kernel's would be copied there.
std::optional<c10::OperatorHandle> out_variant(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& arguments = schema.arguments();
  const auto& results = schema.returns();
  for (const c10::Argument& result : results) {
    if (result.alias_info() != nullptr || result.type()->kind() != c10::TypeKind::TensorType) {
      return std::nullopt;
    }
  }
  const std::string& overload = schema.overload_name();
  for (const std::string& candidate : {overload.empty() ? std::string("out") : overload + "_out", std::string("out")}) {
    const std::optional<c10::OperatorHandle> found = c10::Dispatcher::singleton().findOp({schema.name(), candidate});
    if (results.empty() || !found.has_value() || !found->hasSchema() ||
        !found->hasComputedKernelForDispatchKey(c10::DispatchKey::CPU)) {
      continue;
    }
    const auto& out_arguments = found->schema().arguments();
    bool matches = out_arguments.size() == arguments.size() + results.size();
    for (size_t i = 0; matches && i < out_arguments.size(); ++i) {
      const c10::Argument& argument = out_arguments[i];
      matches = i < arguments.size()
                    ? argument.name() == arguments[i].name() && *argument.type() == *arguments[i].type()
                    : argument.kwarg_only() && argument.alias_info() != nullptr && argument.alias_info()->isWrite() &&
                          argument.type()->kind() == c10::TypeKind::TensorType;
    }
    if (matches) {
      return found;
    }
  }
  return std::nullopt;
}

struct OperatorFacts {
  SchemaFit fit;
  std::optional<c10::OperatorHandle> out;
  std::optional<size_t> generator;
};

// What queueing needs to know of an operator, worked out once.
const OperatorFacts& operator_facts(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static auto* facts = new std::unordered_map<const c10::FunctionSchema*, OperatorFacts>();
  const std::lock_guard<std::mutex> lock(mutex);
  auto found = facts->find(&op.schema());
  if (found == facts->end()) {
    found = facts->emplace(&op.schema(), OperatorFacts{fit_of_schema(op), out_variant(op), generator_argument(op.schema())}).first;
  }
  return found->second;  // an unordered_map's elements stay where they are
}

// The device tensors a queued call reads: found on one host-addressable
// device, as dense strided tensors, beside host scalars and index tensors
// only. Anything else runs now, where the fallback raises what it must.
struct Operands {
  std::optional<c10::Device> device;
  int64_t work = 0;
  uint64_t bytes = 0;
  bool queueable = true;

  void note(const c10::Argument& argument, const at::Tensor& tensor) {
    if (!queueable || !tensor.defined()) {
      return;
    }
    if (tensor.device().is_cpu()) {
      queueable = tensor.dim() == 0 || host_index_argument(argument, tensor);
      return;
    }
    const BackendIdentity* identity = find_backend(tensor.device().type());
    queueable = identity != nullptr && identity->host_addressable && tensor.layout() == c10::kStrided &&
                tensor.has_storage() && !tensor.is_quantized() && !tensor.is_nested() &&
                (!device.has_value() || *device == tensor.device());
    if (!queueable) {
      return;
    }
    device = tensor.device();
    work += tensor.numel();
    bytes += tensor.nbytes();
  }
};

// The device tensor a result stands for: the written argument it is, or a
// new one shaped as the first call's.
at::Tensor device_result(const ResultTensor& shape, const std::vector<at::Tensor>& written,
                         c10::Device device) {
  if (!shape.defined) {
    return at::Tensor();
  }
  if (shape.written >= 0) {
    return written[shape.written];
  }
  return at::empty_strided(shape.sizes, shape.strides, at::TensorOptions(shape.dtype).device(device));
}

// A result the CPU kernel computed, written into the memory of the queued
// call's output.
void write_result(const char* name, const at::Tensor& result, const at::Tensor& output) {
  TORCH_CHECK(result.defined() == output.defined() && (!result.defined() || (result.sizes() == output.sizes() &&
                                                                              result.dtype() == output.dtype())),
              "The CPU kernel of ", name, " returned a result of sizes ", result.sizes(), " and dtype ",
              result.dtype(), " where its meta kernel said ", output.sizes(), " and ", output.dtype(),
              ". Please report this to torchplug; TORCHPLUG_LAUNCH_BLOCKING=1 runs the operator as the CPU does.");
  if (result.defined() && result.numel() > 0) {
    output.copy_(result);
  }
}

}  // namespace

HostCallQueued queue_host_call(const c10::OperatorHandle& op, c10::DispatchKeySet cpu_keys,
                               torch::jit::Stack* stack, ActivityKind kind) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t first = stack->size() - arguments.size();
  const OperatorFacts& facts = operator_facts(op);
  SchemaFit fit = facts.fit;
  if (fit == SchemaFit::kQueueableUnlessMasked) {
    fit = has_mask((*stack)[first + 1]) ? SchemaFit::kWaitsForData : SchemaFit::kQueueable;
  }
  if (fit != SchemaFit::kQueueable) {
    return {fit == SchemaFit::kWaitsForData ? HostCallQueueing::kWaitsForData : HostCallQueueing::kRunsNow};
  }
  Operands operands;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& value = (*stack)[first + i];
    if (value.isDevice()) {
      operands.queueable = false;  // a factory's device: the fallback resolves it
    }
    map_tensors(value, [&](const at::Tensor& tensor) {
      operands.note(arguments[i], tensor);
      return tensor;
    });
  }
  if (cpu_keys != c10::DispatchKeySet(c10::DispatchKey::CPU) || !operands.queueable || !operands.device) {
    return {HostCallQueueing::kRunsNow};
  }
  const c10::Device device = *operands.device;
  uint64_t bytes = operands.bytes;

  const CallSignature signature(schema, *stack);
  if (!signature.cacheable()) {
    return {HostCallQueueing::kRunsNow};
  }
  // A signature is learned from its first call even when that call would
  // not queue (its stream idle): the next may find the stream busy.
  std::shared_ptr<const std::vector<ResultShape>> shapes = known_result_shapes(op, signature);
  const bool capturing =
      shapes == nullptr &&
      translate_runtime_errors([&] { return runtime_stream(current_stream(device)).capturing(); });
  if (capturing) {
    // A graph captures the call, which cannot run now: sized by its meta kernel instead.
    if (std::optional<std::vector<ResultShape>> sized = meta_result_shapes(op, *stack)) {
      shapes = std::make_shared<const std::vector<ResultShape>>(*std::move(sized));
    }
  }
  if (shapes == nullptr) {
    return {HostCallQueueing::kRunsNow, device, 0, call_to_learn(schema, *stack, signature)};
  }
  if (!queues_kernel(device, operands.work)) {
    return {HostCallQueueing::kRunsNow};
  }
  const std::vector<at::Tensor> written = written_arguments(schema, *stack);
  std::optional<QueuedDraw> draw;
  if (facts.generator.has_value()) {
    const c10::IValue& chosen = (*stack)[first + *facts.generator];
    const at::Generator generator = chosen.isNone() ? default_generator(device) : chosen.toGenerator();
    if (is_device_generator(generator, device)) {
      draw = queue_draw(generator, current_stream(device));
    }
    if (!draw.has_value()) {
      return {HostCallQueueing::kRunsNow};  // a host generator, or draws pending on another stream
    }
  }

  // What the queued kernel keeps: views of the device memory (not owning
  // it), and copies of host tensors, which the program may change once the
  // call returns, as it may a host buffer a CUDA copy has read.
  QueuedViews views;
  auto kept = [&views](const at::Tensor& tensor) {
    if (!tensor.defined() || !tensor.device().is_cpu()) {
      return views.view(tensor);
    }
    at::Tensor copy = tensor.clone();
    if (tensor.unsafeGetTensorImpl()->is_wrapped_number()) {
      copy.unsafeGetTensorImpl()->set_wrapped_number(true);
    }
    return copy;
  };
  std::vector<c10::IValue> kept_arguments;
  kept_arguments.reserve(arguments.size());
  for (size_t i = 0; i < arguments.size(); ++i) {
    kept_arguments.push_back(facts.generator == i ? c10::IValue(draw->engine)
                                                  : map_tensors((*stack)[first + i], kept));
  }
  const size_t num_results = schema.returns().size();
  std::vector<c10::IValue> results;  // the caller's
  std::vector<c10::IValue> outputs;  // the queued kernel's: the fresh results it fills, None for written arguments
  results.reserve(num_results);
  outputs.reserve(num_results);
  for (size_t i = 0; i < num_results; ++i) {
    const ResultShape& shape = (*shapes)[i];
    c10::IValue result;
    if (shape.list) {
      c10::List<at::Tensor> tensors;
      for (const ResultTensor& tensor : shape.tensors) {
        tensors.push_back(device_result(tensor, written, device));
      }
      result = std::move(tensors);
    } else {
      result = device_result(shape.tensors.at(0), written, device);
    }
    const bool fresh = schema.returns()[i].alias_info() == nullptr;
    if (fresh) {
      map_tensors(result, [&bytes](const at::Tensor& tensor) {
        bytes += tensor.defined() ? tensor.nbytes() : 0;
        return tensor;
      });
    }
    outputs.push_back(fresh ? map_tensors(result, kept) : c10::IValue());
    results.push_back(std::move(result));
  }

  const char* name = schema.name().c_str();
  // Results are written through the out= overload when each is a tensor of
  // at least one dimension: CPU out= kernels of losses and other reductions
  // resize a 0-d output to the elementwise shape on the way (with a warning);
  // a 0-d result is copied in instead.
  bool out_fits = true;
  for (const c10::IValue& output : outputs) {
    out_fits = out_fits && output.isTensor() && output.toTensor().defined() && output.toTensor().dim() > 0;
  }
  const std::optional<c10::OperatorHandle> out = out_fits ? facts.out : std::nullopt;
  enqueue_kernel(
      name, device,
      [op, out, cpu_keys, name, kept_arguments = std::move(kept_arguments), outputs = std::move(outputs),
       pending_draw = draw.has_value() ? draw->pending : nullptr]() mutable {
        // The draw is done once the kernel ran (or failed); the kernel itself is kept a while longer.
        const std::shared_ptr<void> draw_done = std::move(pending_draw);
        HostAliases aliases;
        auto on_host = [&aliases](const at::Tensor& tensor) {
          return tensor.defined() && !tensor.device().is_cpu() ? aliases.alias(tensor) : tensor;
        };
        torch::jit::Stack call;
        call.reserve(kept_arguments.size() + outputs.size());
        for (const c10::IValue& argument : kept_arguments) {
          call.push_back(map_tensors(argument, on_host));
        }
        if (out.has_value()) {
          c10::SmallVector<const void*, 2> memory;
          for (const c10::IValue& output : outputs) {
            call.push_back(on_host(output.toTensor()));
            memory.push_back(call.back().toTensor().data_ptr());
          }
          out->redispatchBoxed(cpu_keys, &call);
          // A CPU out= kernel that resizes its output on the way moves the
          // alias to new host memory: the result is copied into the device
          // memory then.
          for (size_t i = 0; i < outputs.size(); ++i) {
            const at::Tensor written = call[i].toTensor();
            if (written.data_ptr() != memory[i]) {
              HostAliases device_memory;
              write_result(name, written, device_memory.alias(outputs[i].toTensor()));
            }
          }
          return;
        }
        op.redispatchBoxed(cpu_keys, &call);
        for (size_t i = 0; i < outputs.size(); ++i) {
          if (outputs[i].isTensor()) {
            write_result(name, call[i].toTensor(), on_host(outputs[i].toTensor()));
          } else if (outputs[i].isTensorList()) {
            const c10::List<at::Tensor> computed = call[i].toTensorList();
            const c10::List<at::Tensor> filled = outputs[i].toTensorList();
            TORCH_CHECK(computed.size() == filled.size(), "The CPU kernel of ", name, " returned ", computed.size(),
                        " tensors where a call of the same signature returned ", filled.size(), ".");
            for (size_t j = 0; j < filled.size(); ++j) {
              write_result(name, computed[j], on_host(filled[j]));
            }
          }
        }
      },
      kind);
  torch::jit::drop(*stack, arguments.size());
  for (c10::IValue& result : results) {
    stack->push_back(std::move(result));
  }
  return {HostCallQueueing::kQueued, device, bytes};
}

}  // namespace torchplug
