#include "kernels/call_shapes.h"

#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>

namespace torchplug {
namespace {

enum SignatureWord : int64_t {
  kNone,
  kTensor,
  kTensorList,
  kOptionalTensorList,
  kInt,
  kDouble,
  kBool,
  kIntList,
  kDoubleList,
  kBoolList,
  kString,
  kComplex,
  kDevice,
  kGenerator
};

// Room for a call of three 4-d tensors and a few numbers: the words are one
// allocation for most calls rather than one per doubling.
constexpr size_t kTypicalWords = 64;

int64_t bits(double value) {
  int64_t word = 0;
  std::memcpy(&word, &value, sizeof(word));
  return word;
}

// A list value: its kind, its length, then each element as a word.
template <typename List, typename ToWord>
void add_list(std::vector<int64_t>& words, SignatureWord kind, const List& list, ToWord to_word) {
  words.insert(words.end(), {kind, static_cast<int64_t>(list.size())});
  for (const auto element : list) {
    words.push_back(to_word(element));
  }
}

std::vector<int64_t> geometry(const at::Tensor& tensor) {
  std::vector<int64_t> words(tensor.sizes().begin(), tensor.sizes().end());
  words.insert(words.end(), tensor.strides().begin(), tensor.strides().end());
  words.push_back(tensor.storage_offset());
  return words;
}

}  // namespace

CallSignature::CallSignature(const c10::FunctionSchema& schema, const torch::jit::Stack& stack) {
  const size_t count = schema.arguments().size();
  words_.reserve(kTypicalWords);
  for (size_t i = stack.size() - count; i < stack.size() && cacheable_; ++i) {
    add(stack[i]);
  }
}

void CallSignature::add_tensor(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    words_.push_back(-1);
    return;
  }
  if (tensor.layout() != c10::kStrided || !tensor.has_storage()) {
    cacheable_ = false;
    return;
  }
  const c10::Device device = tensor.device();
  const int64_t bits_of_tensor =
      tensor.is_conj() + 2 * tensor.is_neg() + 4 * tensor.unsafeGetTensorImpl()->is_wrapped_number();
  words_.insert(words_.end(), {static_cast<int64_t>(device.type()), device.index(),
                               static_cast<int64_t>(tensor.scalar_type()), tensor.dim(), tensor.storage_offset(),
                               storage_id(tensor), bits_of_tensor});
  words_.insert(words_.end(), tensor.sizes().begin(), tensor.sizes().end());
  words_.insert(words_.end(), tensor.strides().begin(), tensor.strides().end());
}

// Which of the call's storages the tensor views (in the order they first
// appear): how the arguments alias is part of the signature.
int64_t CallSignature::storage_id(const at::Tensor& tensor) {
  const c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  for (size_t i = 0; i < storages_.size(); ++i) {
    if (storages_[i] == storage) {
      return static_cast<int64_t>(i);
    }
  }
  storages_.push_back(storage);
  return static_cast<int64_t>(storages_.size() - 1);
}

void CallSignature::add(const c10::IValue& value) {
  if (value.isNone()) {
    words_.push_back(kNone);
  } else if (value.isTensor()) {
    words_.push_back(kTensor);
    add_tensor(value.toTensor());
  } else if (value.isTensorList()) {
    words_.insert(words_.end(), {kTensorList, static_cast<int64_t>(value.toTensorList().size())});
    for (const at::Tensor& tensor : value.toTensorList()) {
      add_tensor(tensor);
    }
  } else if (value.isList() && value.toList().elementType()->isSubtypeOf(*c10::OptionalType::ofTensor())) {
    words_.insert(words_.end(), {kOptionalTensorList, static_cast<int64_t>(value.toListRef().size())});
    for (const c10::IValue& element : value.toListRef()) {
      add_tensor(element.isTensor() ? element.toTensor() : at::Tensor());
    }
  } else if (value.isInt()) {
    words_.insert(words_.end(), {kInt, value.toInt()});
  } else if (value.isSymInt() && value.toSymInt().maybe_as_int().has_value()) {
    words_.insert(words_.end(), {kInt, *value.toSymInt().maybe_as_int()});
  } else if (value.isDouble()) {
    words_.insert(words_.end(), {kDouble, bits(value.toDouble())});
  } else if (value.isBool()) {
    words_.insert(words_.end(), {kBool, value.toBool()});
  } else if (value.isComplexDouble()) {
    const c10::complex<double> number = value.toComplexDouble();
    words_.insert(words_.end(), {kComplex, bits(number.real()), bits(number.imag())});
  } else if (value.isIntList()) {
    add_list(words_, kIntList, value.toIntList(), [](int64_t element) { return element; });
  } else if (value.isDoubleList()) {
    add_list(words_, kDoubleList, value.toDoubleList(), bits);
  } else if (value.isBoolList()) {
    add_list(words_, kBoolList, value.toBoolList(), [](bool element) { return static_cast<int64_t>(element); });
  } else if (value.isString()) {
    const std::string& text = value.toStringRef();
    words_.insert(words_.end(), {kString, static_cast<int64_t>(text.size())});
    words_.insert(words_.end(), text.begin(), text.end());
  } else if (value.isDevice()) {
    words_.insert(words_.end(), {kDevice, static_cast<int64_t>(value.toDevice().type()), value.toDevice().index()});
  } else if (value.isGenerator()) {
    words_.push_back(kGenerator);  // which one is no matter to the results' shapes
  } else {
    cacheable_ = false;  // symbolic sizes, script objects
  }
}

namespace {

struct WordsHash {
  size_t operator()(const std::vector<int64_t>& words) const {
    size_t hash = words.size();
    for (const int64_t word : words) {
      hash ^= std::hash<int64_t>{}(word) + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
    }
    return hash;
  }
};

// Remembered answers, per operator; bounded, as a program with changing
// shapes would grow it without end.
constexpr size_t kRememberedPerOperator = 256;
using Answers = std::unordered_map<std::vector<int64_t>, std::shared_ptr<const std::vector<ResultShape>>, WordsHash>;

std::mutex answers_mutex;
auto* answers = new std::unordered_map<const c10::FunctionSchema*, Answers>();  // leaked: kernels run at exit

// The `count` results at `values` as shapes: each tensor's geometry and which
// of `written` it is; nothing when a result is not a tensor or a list of
// them, or a defined tensor fails `describable` (a sparse one has no strides).
template <typename Describable>
std::optional<std::vector<ResultShape>> describe_results(const c10::IValue* values, size_t count,
                                                         const std::vector<at::Tensor>& written,
                                                         Describable describable) {
  std::vector<ResultShape> shapes(count);
  for (size_t i = 0; i < count; ++i) {
    const c10::IValue& value = values[i];
    bool described = value.isTensor() || value.isTensorList();
    shapes[i].list = value.isTensorList();
    map_tensors(value, [&](const at::Tensor& tensor) {
      ResultTensor& result = shapes[i].tensors.emplace_back();
      result.defined = tensor.defined();
      described = described && (!result.defined || describable(tensor));
      if (!result.defined || !described) {
        return tensor;
      }
      for (size_t w = 0; w < written.size(); ++w) {
        if (written[w].unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) {
          result.written = static_cast<int>(w);
        }
      }
      result.sizes = tensor.sizes().vec();
      result.strides = tensor.strides().vec();
      result.dtype = tensor.scalar_type();
      return tensor;
    });
    if (!described) {
      return std::nullopt;
    }
  }
  return shapes;
}

}  // namespace

std::vector<at::Tensor> written_arguments(const c10::FunctionSchema& schema, const torch::jit::Stack& stack) {
  const auto& arguments = schema.arguments();
  const size_t first = stack.size() - arguments.size();
  std::vector<at::Tensor> written;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].alias_info() != nullptr && stack[first + i].isTensor() && stack[first + i].toTensor().defined()) {
      written.push_back(stack[first + i].toTensor());
    }
  }
  return written;
}

std::shared_ptr<const std::vector<ResultShape>> known_result_shapes(const c10::OperatorHandle& op,
                                                                    const CallSignature& signature) {
  const std::lock_guard<std::mutex> lock(answers_mutex);
  const auto known = answers->find(&op.schema());
  if (known == answers->end()) {
    return nullptr;
  }
  const auto found = known->second.find(signature.words());
  return found == known->second.end() ? nullptr : found->second;
}

CallToLearn call_to_learn(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                          CallSignature signature) {
  CallToLearn call{std::move(signature), written_arguments(schema, stack), {}};
  for (const at::Tensor& tensor : call.written) {
    call.written_geometry.push_back(geometry(tensor));
  }
  return call;
}

std::optional<std::vector<ResultShape>> meta_result_shapes(const c10::OperatorHandle& op,
                                                           const torch::jit::Stack& stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t count = schema.arguments().size();
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::Meta)) {
    return std::nullopt;
  }
  const std::vector<at::Tensor> written = written_arguments(schema, stack);
  std::vector<at::Tensor> written_on_meta;
  torch::jit::Stack call;
  call.reserve(count);
  for (size_t i = stack.size() - count; i < stack.size(); ++i) {
    call.push_back(map_tensors(stack[i], [&](const at::Tensor& tensor) {
      if (!tensor.defined()) {
        return tensor;
      }
      at::Tensor on_meta = at::empty_strided(tensor.sizes(), tensor.strides(), tensor.options().device(c10::kMeta));
      for (const at::Tensor& argument : written) {
        if (argument.unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) {
          written_on_meta.push_back(on_meta);
        }
      }
      return on_meta;
    }));
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &call);
  } catch (const std::exception&) {
    return std::nullopt;  // the meta kernel refuses what the CPU kernel may take
  }
  return describe_results(call.data(), schema.returns().size(), written_on_meta,
                          [](const at::Tensor& tensor) { return tensor.layout() == c10::kStrided; });
}

void learn_result_shapes(const c10::OperatorHandle& op, CallToLearn call, const torch::jit::Stack& stack) {
  for (size_t w = 0; w < call.written.size(); ++w) {
    if (geometry(call.written[w]) != call.written_geometry[w]) {
      return;  // resized
    }
  }
  const size_t count = op.schema().returns().size();
  std::optional<std::vector<ResultShape>> shapes =
      describe_results(&stack[stack.size() - count], count, call.written, [](const at::Tensor& tensor) {
        return tensor.layout() == c10::kStrided && !tensor.device().is_cpu();
      });
  if (!shapes.has_value()) {
    return;
  }
  const std::lock_guard<std::mutex> lock(answers_mutex);
  Answers& known = (*answers)[&op.schema()];
  if (known.size() >= kRememberedPerOperator) {
    known.clear();
  }
  known.emplace(call.signature.words(), std::make_shared<const std::vector<ResultShape>>(*std::move(shapes)));
}

}  // namespace torchplug
