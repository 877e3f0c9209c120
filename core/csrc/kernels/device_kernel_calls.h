#pragma once
// Calling the core's device kernels (device_kernels/kernel_abi.h) from the
// host: which tensors a kernel takes as they are, their arguments in the
// driver's kernel ABI, and the launch on the current stream. Shared by the
// operators that run inside a device whose memory the host cannot address.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/util/Exception.h>

#include "backend/backend.h"
#include "device_kernels/kernel_abi.h"
#include "torchplug/driver.h"

namespace torchplug {

namespace dk = device_kernels;

// Whether `type`'s devices run the core's device kernels (their driver loads
// the core's kernel image).
bool has_module_kernels(c10::DeviceType type);

// The kernels' element type for `type`, if the conversion kernel takes it.
std::optional<dk::DType> element_type(c10::ScalarType type);

// The kernels' element type for `type`, if the arithmetic kernels take it.
std::optional<dk::DType> kernel_dtype(c10::ScalarType type);

// A device tensor a kernel reads or writes as it is: on `device`, strided,
// dense, of a type the kernels take, with no lazy conjugate or negation.
bool dense_on(const at::Tensor& tensor, c10::Device device);

// dense_on `model`'s device, of its type and shape.
bool dense_like(const at::Tensor& tensor, const at::Tensor& model);

// Indices the kernels read as they are: int64 or int32, contiguous, strided,
// on `device`.
bool kernel_indices(const at::Tensor& indices, c10::Device device);

// The bytes of one row of a contiguous tensor's first dimension (0 when it
// has no elements).
int64_t row_bytes(const at::Tensor& tensor);

// An optional tensor argument's tensor, undefined when it is absent.
inline at::Tensor defined_or_none(const std::optional<at::Tensor>& tensor) {
  return tensor.has_value() ? *tensor : at::Tensor();
}

// Kernel arguments: a tensor's device address (null when undefined), an
// int64, a float64, an enum's value, a tensor's element type.
TPD_KernelArg pointer(const at::Tensor& tensor);
TPD_KernelArg integer(int64_t value);
TPD_KernelArg number(double value);
template <typename Enum>
TPD_KernelArg code(Enum value) {
  return integer(static_cast<int64_t>(value));
}
TPD_KernelArg dtype_of(const at::Tensor& tensor);

// Queues device kernel `kernel` on `device`'s current stream; when launches
// block (TORCHPLUG_LAUNCH_BLOCKING=1), waits for it, so a failure names its operator.
void launch(const char* kernel, c10::Device device, const TPD_KernelArg* args, size_t count);
inline void launch(const char* kernel, c10::Device device, std::initializer_list<TPD_KernelArg> args) {
  launch(kernel, device, args.begin(), args.size());
}

// The dense keys of the backend of the first device tensor among `tensors`
// (an operand may be a host tensor, even the first): how a call the kernels
// do not cover reaches the copying fallback.
template <typename... Tensors>
c10::DispatchKeySet fallback_keys(const Tensors&... tensors) {
  const at::Tensor* device_tensor = nullptr;
  for (const at::Tensor* tensor : {&tensors...}) {
    if (device_tensor == nullptr && tensor->defined() && !tensor->device().is_cpu()) {
      device_tensor = tensor;
    }
  }
  TORCH_INTERNAL_ASSERT(device_tensor != nullptr, "a device kernel was called without a device operand");
  return backend(device_tensor->device().type()).dense_keys;
}

}  // namespace torchplug
