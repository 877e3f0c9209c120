// The npu operator library: schemas, and the fused kernels for the CPU and
// the npu (PrivateUse1) dispatch keys, through torch's stable ABI. Autograd
// formulas and the fake (meta) implementations for torch.compile are
// registered from Python (torch_vnpu/_ops.py), next to the wrappers users call.
#include <torch/csrc/stable/library.h>

#include "boxing.h"
#include "ops.h"

STABLE_TORCH_LIBRARY(npu, m) {
  m.def("fast_gelu(Tensor self) -> Tensor");
  m.def("fast_gelu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("fast_gelu_backward(Tensor grad, Tensor self) -> Tensor");
  m.def("rms_norm(Tensor self, Tensor weight, float eps=1e-06) -> Tensor");
  m.def("rms_norm_backward(Tensor grad, Tensor self, Tensor weight, float eps) -> (Tensor, Tensor)");
}

namespace {

// The same kernels serve CPU and npu tensors.
void register_kernels(torch::stable::detail::StableLibrary& m) {
  m.impl("fast_gelu", torch_vnpu::boxed<&torch_vnpu::fast_gelu>);
  m.impl("fast_gelu.out", torch_vnpu::boxed<&torch_vnpu::fast_gelu_out>);
  m.impl("fast_gelu_backward", torch_vnpu::boxed<&torch_vnpu::fast_gelu_backward>);
  m.impl("rms_norm", torch_vnpu::boxed<&torch_vnpu::rms_norm>);
  m.impl("rms_norm_backward", torch_vnpu::boxed<&torch_vnpu::rms_norm_backward>);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(npu, CPU, m) { register_kernels(m); }

STABLE_TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) { register_kernels(m); }
