#include "kernels/device_kernel_calls.h"

#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>


#include "backend/backend_inl.h"
#include "driver/device_runtime.h"
#include "driver/kernel_module.h"
#include "kernels/device_copy.h"
#include "launch/device_function.h"

namespace torchplug {

bool has_module_kernels(c10::DeviceType type) {
  return translate_runtime_errors([&] { return driver::KernelModule::of(device_runtime(type)) != nullptr; });
}

std::optional<dk::DType> kernel_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
      return dk::DType::kFloat32;
    case c10::kDouble:
      return dk::DType::kFloat64;
    case c10::kBFloat16:
      return dk::DType::kBFloat16;
    default:
      return std::nullopt;
  }
}

bool dense_on(const at::Tensor& tensor, c10::Device device) {
  return tensor.defined() && !device.is_cpu() && tensor.device() == device && tensor.layout() == c10::kStrided &&
         tensor.is_contiguous() && !tensor.is_conj() && !tensor.is_neg() &&
         kernel_dtype(tensor.scalar_type()).has_value();
}

namespace {

// Whether a kernel running over `a` and `b` as flat arrays pairs their elements
// index by index: both dense, with equal strides wherever a dimension has more
// than one element.
bool same_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  if (!a.is_non_overlapping_and_dense() || !b.is_non_overlapping_and_dense() || a.sizes() != b.sizes()) {
    return false;
  }
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<FlatOperands> flat_operands(const at::Tensor& self) {
  const c10::Device device = self.device();
  if (dense_on(self, device)) {
    return FlatOperands{at::empty(self.sizes(), self.options()), self};
  }
  if (!self.defined() || device.is_cpu() || self.layout() != c10::kStrided || self.is_conj() || self.is_neg() ||
      !kernel_dtype(self.scalar_type()).has_value()) {
    return std::nullopt;
  }
  // The CPU's layout of the result, from an iterator over a meta tensor of `self`'s shape and strides.
  const at::Tensor shape = at::empty_strided(self.sizes(), self.strides(), self.options().device(c10::kMeta));
  at::TensorIterator iter = at::TensorIteratorConfig().add_owned_output(at::Tensor()).add_const_input(shape).build();
  at::Tensor out = at::empty_strided(self.sizes(), iter.output().strides(), self.options());
  if (same_dense_layout(self, out)) {
    return FlatOperands{out, self};
  }
  at::Tensor in = at::empty_strided(self.sizes(), out.strides(), self.options());
  if (!copy_inside_device(self, in)) {
    return std::nullopt;
  }
  return FlatOperands{out, in};
}

bool dense_like(const at::Tensor& tensor, const at::Tensor& model) {
  return dense_on(tensor, model.device()) && tensor.scalar_type() == model.scalar_type() &&
         tensor.sizes() == model.sizes();
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
