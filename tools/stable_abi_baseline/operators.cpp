// torch_vnpu's forward operators written against torch's C++ API, as the
// plugin was before its port to the stable ABI (commit bfcacc5): the
// baseline tools/bench_stable_abi.py times the stable-ABI operators against.
// The loops are torch_vnpu's own (fused_loops.cpp), so the two sides differ
// only in how torch calls the operator and how the operator talks to torch.
// Registered as torch.ops.npu_cxx_abi.*, beside torch.ops.npu.*.
#include <Python.h>

#include <ATen/Dispatch.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>
#include <torchplug/kernel_api_load.h>
#include <torchplug/kernel_scope.h>

#include "fused_loops.h"

namespace {

void check_floating(const char* op, const at::Tensor& tensor) {
  TORCH_CHECK(at::isFloatingType(tensor.scalar_type()), "npu_cxx_abi::", op,
              ": input must be a floating-point tensor, got ", tensor.scalar_type(), ".");
}

at::Tensor fast_gelu(const at::Tensor& self) {
  check_floating("fast_gelu", self);
  const at::Tensor x = self.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const torchplug::KernelScope scope("npu_cxx_abi::fast_gelu", x.device(), {x, y});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "npu_cxx_abi::fast_gelu", [&] {
    torch_vnpu::fast_gelu_loop(x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), x.numel());
  });
  return y;
}

at::Tensor rms_norm(const at::Tensor& self, const at::Tensor& weight, double eps) {
  check_floating("rms_norm", self);
  TORCH_CHECK(self.device() == weight.device() && self.scalar_type() == weight.scalar_type(),
              "npu_cxx_abi::rms_norm: weight must have the input's device and dtype.");
  TORCH_CHECK(self.dim() >= 1 && weight.dim() == 1 && weight.size(0) == self.size(-1),
              "npu_cxx_abi::rms_norm: weight must be 1-D with as many elements as the input's last dimension.");
  TORCH_CHECK(eps >= 0, "npu_cxx_abi::rms_norm: eps must be non-negative, got ", eps, ".");
  const at::Tensor x = self.contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const torchplug::KernelScope scope("npu_cxx_abi::rms_norm", x.device(), {x, w, y});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "npu_cxx_abi::rms_norm", [&] {
    torch_vnpu::rms_norm_loop(x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                              y.mutable_data_ptr<scalar_t>(), rows, cols, eps);
  });
  return y;
}

void register_kernels(torch::Library& m) {
  m.impl("fast_gelu", &fast_gelu);
  m.impl("rms_norm", &rms_norm);
}

}  // namespace

TORCH_LIBRARY(npu_cxx_abi, m) {
  m.def("fast_gelu(Tensor self) -> Tensor");
  m.def("rms_norm(Tensor self, Tensor weight, float eps=1e-06) -> Tensor");
}

TORCH_LIBRARY_IMPL(npu_cxx_abi, CPU, m) { register_kernels(m); }

TORCH_LIBRARY_IMPL(npu_cxx_abi, PrivateUse1, m) { register_kernels(m); }

PyMODINIT_FUNC PyInit_stable_abi_baseline() {
  static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "stable_abi_baseline",
                                   "torch.ops.npu_cxx_abi.*, registered when this module is imported.", -1,
                                   nullptr};
  if (!torchplug::load_kernel_api()) {
    return nullptr;
  }
  return PyModule_Create(&definition);
}
