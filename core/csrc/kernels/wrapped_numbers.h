#pragma once
// Python numbers in binary operators (`x * 0.5`, `p.mul_(0.9)`): a 0-dim CPU
// "wrapped number" tensor, which the CPU's iterator casts to the operation's
// dtype. The direct device loops cast it first, without dispatching an
// operator for it: a training step of a small model makes hundreds of such
// calls, and three dispatched operators each (result_type, to, copy) cost
// more than the arithmetic.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace torchplug {

bool is_wrapped_number(const at::Tensor& tensor);
// The dtype type promotion gives an operation over `a` and `b` (torch.result_type).
c10::ScalarType promoted_type(const at::Tensor& a, const at::Tensor& b);
// `number` (a wrapped number) as a wrapped number of `type`.
at::Tensor wrapped_number_in(const at::Tensor& number, c10::ScalarType type);

}  // namespace torchplug
