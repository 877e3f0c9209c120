// Native kernels for hot operators whose CPU structured kernel computes
// directly. (Kernels reached through a DispatchStub cannot serve another
// device type: the stub's table cannot be filled from outside libtorch.) Device memory is host memory, so a device kernel is the
// CPU class run over the device tensors themselves: it computes output shapes
// (meta) and the result (impl); this file only allocates outputs on the
// device. That skips the fallback's boxing and aliasing, which dominate small ops.
#include <array>
#include <optional>
#include <type_traits>
#include <utility>

#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/mm_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/backend.h"
#include "aten/cpu_fallback.h"
#include "aten/device_allocator.h"
#include "aten/host_alias.h"
#include "aten/kernel_launch.h"
#include "runtime/memory_guard.h"

namespace torchplug {
namespace {

// A CPU structured kernel whose outputs live on `device`.
template <class CpuKernel, size_t Outputs = 1>
struct OnDevice final : CpuKernel {
  explicit OnDevice(c10::Device device) : device(device) {}

  void set_output_strided(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    set_output_raw_strided(index, sizes, strides, options);
  }

  void set_output_raw_strided(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    allocate(index, sizes, strides, options);
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, CpuKernel>) {
      CpuKernel::set_output_raw_strided(index, sizes, strides, options);  // registers the operand
    }
  }

  const at::Tensor& maybe_get_output(int64_t index) override { return outputs[index]; }

  void allocate(int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::TensorOptions options) {
    const c10::DeviceGuard guard(device);  // the allocator serves the current device
    const c10::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
    // Empty strides mean "any layout": contiguous in the requested memory format.
    outputs[index] = strides.empty()
                         ? at::detail::empty_generic(sizes, &device_allocator(device.type()),
                                                     device_key_set(device.type()), dtype,
                                                     options.memory_format_opt())
                         : at::detail::empty_strided_generic(sizes, strides, &device_allocator(device.type()),
                                                             device_key_set(device.type()), dtype);
  }

  c10::Device device;
  std::array<at::Tensor, Outputs> outputs;
};

// The device a kernel runs on (see KernelDevice).
c10::Device common_device(const char* op, std::initializer_list<std::pair<const at::Tensor*, const char*>> operands) {
  KernelDevice where(op);
  for (const auto& [tensor, argument] : operands) {
    where.note(*tensor, argument);
  }
  return where.device();
}

// In strict mode the CPU kernel runs over host aliases, through the CPU
// fallback: over the device tensors themselves, what it allocates on the way
// (a resolved conjugate, a contiguous copy) would be device memory outside
// the launch's grant.
template <typename... Args>
at::Tensor through_fallback(const char* op_name, c10::Device device, const Args&... args) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(op_name, "");
  torch::jit::Stack stack;
  torch::jit::push(stack, args...);
  aliasing_cpu_fallback(op, device_key_set(device.type()), &stack);
  return torch::jit::pop(stack).toTensor();
}

#define TORCHPLUG_BINARY_KERNEL(name, CpuKernel, other_name)                                       \
  at::Tensor name(const at::Tensor& self, const at::Tensor& other) {                               \
    const c10::Device device =                                                                     \
        common_device("aten::" #name, {{&self, "self"}, {&other, other_name}});                   \
    if (runtime::strict_mode()) {                                                                  \
      return through_fallback("aten::" #name, device, self, other);                                \
    }                                                                                              \
    OnDevice<CpuKernel> op(device);                                                                \
    op.meta(self, other);                                                                          \
    const KernelLaunch launch("aten::" #name, device, touched_memory({&self, &other, &op.outputs[0]})); \
    op.impl(self, other, op.outputs[0]);                                                           \
    return std::move(op.outputs[0]);                                                               \
  }

TORCHPLUG_BINARY_KERNEL(mm, at::native::structured_mm_out_cpu, "mat2")

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  const c10::Device device = common_device("aten::addmm", {{&self, "self"}, {&mat1, "mat1"}, {&mat2, "mat2"}});
  if (runtime::strict_mode()) {
    return through_fallback("aten::addmm", device, self, mat1, mat2, beta, alpha);
  }
  OnDevice<at::native::structured_addmm_out_cpu> op(device);
  op.meta(self, mat1, mat2, beta, alpha);
  const KernelLaunch launch("aten::addmm", device, touched_memory({&self, &mat1, &mat2, &op.outputs[0]}));
  op.impl(self, mat1, mat2, beta, alpha, op.outputs[0]);
  return std::move(op.outputs[0]);
}

}  // namespace

void register_native_kernels(torch::Library& library) {
  library.impl("mm", TORCH_FN(mm));
  library.impl("addmm", TORCH_FN(addmm));
}

}  // namespace torchplug
