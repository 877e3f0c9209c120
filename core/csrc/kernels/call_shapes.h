#pragma once
// What an operator call's results will be (sizes, strides, dtypes), known
// before the call runs, so it can be queued: learned from the first call of
// the same signature (the operator, its arguments' shapes, dtypes, devices
// and aliasing, its non-tensor values), which runs at once. It holds for the
// operators whose results' shapes follow from the signature alone: those
// with a meta kernel (which cannot read data) and no data-dependent tag.
// Learning from the CPU kernel rather than asking the meta kernel costs no
// meta call (many run in Python, at hundreds of microseconds), and answers
// as the kernel does where a meta kernel disagrees with it (batch norm's
// saved statistics in evaluation).
#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

namespace torchplug {

struct ResultTensor {
  bool defined = false;
  // The written argument it is (in-place and out= results): an index into the
  // call's defined written tensor arguments, in order; -1 for a new tensor.
  int written = -1;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// One result of the schema: a tensor, or a list of them.
struct ResultShape {
  bool list = false;
  std::vector<ResultTensor> tensors;
};

// A call's signature: the arguments at the top of a stack, as words.
class CallSignature {
 public:
  CallSignature(const c10::FunctionSchema& schema, const torch::jit::Stack& stack);
  // False when an argument has no place in a signature (a symbolic size, a
  // sparse tensor): such calls always run at once.
  bool cacheable() const { return cacheable_; }
  const std::vector<int64_t>& words() const { return words_; }

 private:
  void add(const c10::IValue& value);
  void add_tensor(const at::Tensor& tensor);
  int64_t storage_id(const at::Tensor& tensor);

  std::vector<int64_t> words_;
  std::vector<const c10::StorageImpl*> storages_;
  bool cacheable_ = true;
};

// The results of a call of `op` with `signature`, if a call learned them
// (shared, not copied: every call of a learned signature asks).
std::shared_ptr<const std::vector<ResultShape>> known_result_shapes(const c10::OperatorHandle& op,
                                                                    const CallSignature& signature);

// The results of the call at the top of `stack` as `op`'s meta kernel sizes
// them (its tensors as meta tensors of their geometry), or nothing when it
// has none or refuses them. What a stream capturing a graph queues a call
// with before any call of its signature ran.
std::optional<std::vector<ResultShape>> meta_result_shapes(const c10::OperatorHandle& op,
                                                           const torch::jit::Stack& stack);

// A call that ran at once and whose results `learn_result_shapes` will record.
struct CallToLearn {
  CallSignature signature;
  // The written tensor arguments (in-place, out=), and their geometry before
  // the call: one resized by the call (an out= of the wrong size) is not
  // learned, as a queued call could not resize it.
  std::vector<at::Tensor> written;
  std::vector<std::vector<int64_t>> written_geometry;
};

// The defined tensors of the written arguments at the top of `stack`, in order.
std::vector<at::Tensor> written_arguments(const c10::FunctionSchema& schema, const torch::jit::Stack& stack);

CallToLearn call_to_learn(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                          CallSignature signature);

// Records the results at the top of `stack` of the call `call` describes.
void learn_result_shapes(const c10::OperatorHandle& op, CallToLearn call, const torch::jit::Stack& stack);

// Learns the results of an unboxed kernel's call that runs at once on an
// idle stream, so that a later call of its signature on a busy stream is
// queued (a kernel alternating between the two would otherwise wait each
// time it meets a busy stream with a signature it has not learned). Boxing
// the arguments costs far less than the boxed path's host call would.
template <typename Op>
class LearnedAtOnce {
 public:
  template <typename... Args>
  explicit LearnedAtOnce(const Args&... args) {
    torch::jit::push(stack_, args...);
    CallSignature signature(handle().schema(), stack_);
    if (signature.cacheable() && known_result_shapes(handle(), signature) == nullptr) {
      call_ = call_to_learn(handle().schema(), stack_, std::move(signature));
    }
  }

  void learn(const at::Tensor& result) {
    if (call_.has_value()) {
      torch::jit::push(stack_, result);
      learn_result_shapes(handle(), *std::move(call_), stack_);
    }
  }

  template <typename... Results>
  void learn(const std::tuple<Results...>& results) {
    if (call_.has_value()) {
      std::apply([this](const auto&... result) { torch::jit::push(stack_, result...); }, results);
      learn_result_shapes(handle(), *std::move(call_), stack_);
    }
  }

 private:
  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return op;
  }

  torch::jit::Stack stack_;
  std::optional<CallToLearn> call_;
};

// Calls `convert` on each tensor `value` holds (a tensor, a list of tensors,
// a list of optional tensors), and gives back `value` with the converted ones.
template <typename Convert>
c10::IValue map_tensors(const c10::IValue& value, const Convert& convert) {
  if (value.isTensor()) {
    return convert(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> converted;
    converted.reserve(value.toTensorList().size());
    for (const at::Tensor& tensor : value.toTensorList()) {
      converted.push_back(convert(tensor));
    }
    return converted;
  }
  if (value.isList() && value.toList().elementType()->isSubtypeOf(*c10::OptionalType::ofTensor())) {
    c10::List<std::optional<at::Tensor>> converted;
    for (const c10::IValue& element : value.toListRef()) {
      converted.push_back(element.isTensor() ? std::optional<at::Tensor>(convert(element.toTensor())) : std::nullopt);
    }
    return converted;
  }
  return value;
}

}  // namespace torchplug
