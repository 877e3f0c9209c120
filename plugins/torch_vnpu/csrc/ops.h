#pragma once
// The npu::* operators at the tensor level: argument checks, layout and
// allocation around the fused loops. The same functions serve the CPU and the
// PrivateUse1 (npu) dispatch keys. Written against torch's stable ABI (its
// C shim, through TensorHandle), so one build loads into every torch the core
// supports.
#include <tuple>

#include "tensor_handle.h"

namespace torch_vnpu {

// Each takes and returns the handles torch's boxed convention passes
// (boxing.h registers them).
TensorHandle fast_gelu(TensorHandle self);
// Writes into `out` (resized like `self`), which may be `self` itself.
TensorHandle fast_gelu_out(TensorHandle self, TensorHandle out);
TensorHandle fast_gelu_backward(TensorHandle grad, TensorHandle self);
TensorHandle rms_norm(TensorHandle self, TensorHandle weight, double eps);
std::tuple<TensorHandle, TensorHandle> rms_norm_backward(TensorHandle grad, TensorHandle self, TensorHandle weight,
                                                         double eps);

}  // namespace torch_vnpu
