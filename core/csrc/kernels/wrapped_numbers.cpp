#include "kernels/wrapped_numbers.h"

#include <ATen/ScalarOps.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/result_type_native.h>

namespace torchplug {

bool is_wrapped_number(const at::Tensor& tensor) {
  return tensor.defined() && tensor.unsafeGetTensorImpl()->is_wrapped_number();
}

c10::ScalarType promoted_type(const at::Tensor& a, const at::Tensor& b) { return at::native::result_type(a, b); }

at::Tensor wrapped_number_in(const at::Tensor& number, c10::ScalarType type) {
  at::Tensor cast = at::detail::scalar_tensor_static(at::native::_local_scalar_dense_cpu(number), type, c10::kCPU);
  cast.unsafeGetTensorImpl()->set_wrapped_number(true);
  return cast;
}

}  // namespace torchplug
