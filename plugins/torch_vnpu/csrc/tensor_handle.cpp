#include "tensor_handle.h"

#include <array>
#include <cstddef>
#include <utility>

#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/stableivalue_conversions.h>

namespace torch_vnpu {

using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;

namespace {

// torch's conversions ask for the code of each type in turn until one
// matches (seven calls for float32, six for PrivateUse1); the codes these
// operators meet are asked once, and any other goes to torch's conversion.
template <typename Type, size_t N>
Type from_code(int32_t code, const std::array<std::pair<int32_t, Type>, N>& known) {
  for (const auto& [known_code, type] : known) {
    if (code == known_code) {
      return type;
    }
  }
  return torch::stable::detail::to<Type>(torch::stable::detail::from(code));
}

}  // namespace

ScalarType element_type(int32_t code) {
  static const std::array<std::pair<int32_t, ScalarType>, 4> known{{
      {aoti_torch_dtype_float32(), ScalarType::Float},
      {aoti_torch_dtype_float64(), ScalarType::Double},
      {aoti_torch_dtype_float16(), ScalarType::Half},
      {aoti_torch_dtype_bfloat16(), ScalarType::BFloat16},
  }};
  return from_code(code, known);
}

DeviceType device_type_of(int32_t code) {
  static const std::array<std::pair<int32_t, DeviceType>, 2> known{{
      {aoti_torch_device_type_privateuse1(), DeviceType::PrivateUse1},
      {aoti_torch_device_type_cpu(), DeviceType::CPU},
  }};
  return from_code(code, known);
}

TensorHandle::TensorHandle(const torch::stable::Tensor& tensor) : handle_(nullptr) {
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle(tensor.get(), &handle_));
}

TensorHandle::~TensorHandle() {
  if (handle_ != nullptr) {
    // A destructor cannot report the error; torch's deleter of
    // torch::stable::Tensor ignores it too.
    (void)aoti_torch_delete_tensor_object(handle_);
  }
}

torch::stable::Tensor TensorHandle::tensor() const {
  AtenTensorHandle copy = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle(handle_, &copy));
  return torch::stable::Tensor(copy);
}

int64_t TensorHandle::dim() const {
  int64_t dims = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dim(handle_, &dims));
  return dims;
}

torch::headeronly::IntHeaderOnlyArrayRef TensorHandle::sizes() const {
  int64_t* sizes = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_sizes(handle_, &sizes));
  return {sizes, static_cast<size_t>(dim())};
}

int64_t TensorHandle::numel() const {
  int64_t numel = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_numel(handle_, &numel));
  return numel;
}

bool TensorHandle::is_contiguous() const {
  bool contiguous = false;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_is_contiguous(handle_, &contiguous));
  return contiguous;
}

int32_t TensorHandle::dtype() const {
  int32_t dtype = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(handle_, &dtype));
  return dtype;
}

int32_t TensorHandle::device_type() const {
  int32_t type = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(handle_, &type));
  return type;
}

torch::stable::DeviceIndex TensorHandle::device_index() const {
  int32_t index = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(handle_, &index));
  return static_cast<torch::stable::DeviceIndex>(index);
}


void* TensorHandle::data() const {
  void* data = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_data_ptr(handle_, &data));
  return data;
}

}  // namespace torch_vnpu
