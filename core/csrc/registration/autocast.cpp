// Autocast on simulated devices follows CUDA's policies, so mixed-precision
// code behaves the same here as on a GPU: matmul-like operators run in the
// autocast dtype, numerically sensitive ones (reductions, softmax, norms,
// losses, exp/log/pow) in float32, and multi-input ones at the widest input
// type. torch ships the operator lists; this registers them for the device.
#include "registration/autocast.h"

#include <memory>

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "backend/backend.h"
#include "registration/library_registry.h"

namespace torchplug {
namespace {

using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

Tensor binary_cross_entropy_refused(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "binary_cross_entropy (nn.BCELoss) is unsafe under autocast, as on CUDA: its input usually "
              "comes from a sigmoid whose low-precision output saturates. Use "
              "binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss) on the logits instead, or run the "
              "loss outside the autocast region.");
}

}  // namespace

// The macros from ATen/autocast_mode.h register on a library named `m`.
template <c10::DeviceType kType>
void register_autocast_policies(torch::Library& m) {
#define TORCHPLUG_LOWER_PRECISION(...) KERNEL(kType, __VA_ARGS__, lower_precision_fp)
#define TORCHPLUG_FP32(...) KERNEL(kType, __VA_ARGS__, fp32)
#define TORCHPLUG_FP32_SET_OPT_DTYPE(...) KERNEL(kType, __VA_ARGS__, fp32_set_opt_dtype)
#define TORCHPLUG_FP32_APPEND_DTYPE(...) KERNEL_DIFFERENT_REDISPATCH_SIGNATURE(kType, __VA_ARGS__)
#define TORCHPLUG_PROMOTE(...) KERNEL(kType, __VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(TORCHPLUG_LOWER_PRECISION)
  AT_FORALL_FP32(TORCHPLUG_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TORCHPLUG_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(TORCHPLUG_FP32_APPEND_DTYPE)
  AT_FORALL_PROMOTE(TORCHPLUG_PROMOTE)
#undef TORCHPLUG_LOWER_PRECISION
#undef TORCHPLUG_FP32
#undef TORCHPLUG_FP32_SET_OPT_DTYPE
#undef TORCHPLUG_FP32_APPEND_DTYPE
#undef TORCHPLUG_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_refused));
}

template void register_autocast_policies<c10::DeviceType::PrivateUse1>(torch::Library&);
template void register_autocast_policies<c10::DeviceType::HPU>(torch::Library&);

void register_autocast(const BackendIdentity& backend) {
  register_once(backend.type, [&backend] {
    const c10::DispatchKey key = backend.autocast_key;
    // Operators without a policy run unchanged.
    auto passthrough = std::make_unique<torch::Library>(torch::Library::IMPL, "_", key, __FILE__, __LINE__);
    passthrough->fallback(torch::CppFunction::makeFallthrough());
    auto policies = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    backend.kind->register_autocast_policies(*policies);
    Libraries libraries;
    libraries.push_back(std::move(passthrough));
    libraries.push_back(std::move(policies));
    return libraries;
  });
}

}  // namespace torchplug
