#include "kernels/device_kernel_calls.h"

#include <algorithm>
#include <array>

#include "backend/backend_inl.h"
#include "driver/device_runtime.h"
#include "driver/kernel_module.h"
#include "launch/device_function.h"

namespace torchplug {

bool has_module_kernels(c10::DeviceType type) {
  return translate_runtime_errors([&] { return driver::KernelModule::of(device_runtime(type)) != nullptr; });
}

std::optional<dk::DType> element_type(c10::ScalarType type) {
  // c10's type of each DType, in the kernels' numbering (kernel_abi.h).
  static constexpr std::array<c10::ScalarType, dk::kDTypeCount> kScalarTypes = {
      c10::kFloat, c10::kDouble, c10::kBFloat16, c10::kBool, c10::kByte, c10::kChar, c10::kShort, c10::kInt, c10::kLong};
  const auto* found = std::find(kScalarTypes.begin(), kScalarTypes.end(), type);
  if (found == kScalarTypes.end()) {
    return std::nullopt;
  }
  return static_cast<dk::DType>(found - kScalarTypes.begin());
}

std::optional<dk::DType> kernel_dtype(c10::ScalarType type) {
  const std::optional<dk::DType> dtype = element_type(type);
  return dtype && dk::is_arithmetic_dtype(*dtype) ? dtype : std::nullopt;
}

bool dense_on(const at::Tensor& tensor, c10::Device device) {
  return tensor.defined() && !device.is_cpu() && tensor.device() == device && tensor.layout() == c10::kStrided &&
         tensor.is_contiguous() && !tensor.is_conj() && !tensor.is_neg() &&
         kernel_dtype(tensor.scalar_type()).has_value();
}

bool dense_like(const at::Tensor& tensor, const at::Tensor& model) {
  return dense_on(tensor, model.device()) && tensor.scalar_type() == model.scalar_type() &&
         tensor.sizes() == model.sizes();
}

bool kernel_indices(const at::Tensor& indices, c10::Device device) {
  return indices.defined() && indices.device() == device && indices.layout() == c10::kStrided &&
         indices.is_contiguous() && (indices.scalar_type() == c10::kLong || indices.scalar_type() == c10::kInt);
}

int64_t row_bytes(const at::Tensor& tensor) {
  return tensor.numel() == 0 ? 0 : tensor.numel() / tensor.size(0) * static_cast<int64_t>(tensor.element_size());
}

TPD_KernelArg pointer(const at::Tensor& tensor) {
  TPD_KernelArg arg{};
  arg.kind = TPD_KERNEL_ARG_POINTER;
  arg.value.pointer = tensor.defined() ? const_cast<void*>(tensor.const_data_ptr()) : nullptr;
  return arg;
}

TPD_KernelArg integer(int64_t value) {
  TPD_KernelArg arg{};
  arg.kind = TPD_KERNEL_ARG_INT64;
  arg.value.int64 = value;
  return arg;
}

TPD_KernelArg number(double value) {
  TPD_KernelArg arg{};
  arg.kind = TPD_KERNEL_ARG_FLOAT64;
  arg.value.float64 = value;
  return arg;
}

TPD_KernelArg dtype_of(const at::Tensor& tensor) { return code(*kernel_dtype(tensor.scalar_type())); }

void launch(const char* kernel, c10::Device device, const TPD_KernelArg* args, size_t count) {
  TPD_Function* function = translate_runtime_errors(
      [&] { return driver::KernelModule::of(device_runtime(device.type()))->function(kernel); });
  launch_device_function(device, function, args, count);
}

}  // namespace torchplug
