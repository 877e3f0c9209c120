// torch asks a PrivateUse1 device which fused attention kernel to use through
// the device slot of `_fused_sdp_choice_stub`; with none it runs the math
// decomposition, a dozen operators where the CPU runs one flash kernel. On a
// device whose memory the host addresses the CPU's answer is right, since the
// CPU's kernels run over device memory in place: results equal the CPU's bit
// for bit. A device whose memory the host cannot address would reach the
// flash kernel only through the copying fallback (every operand copied out
// and back); there the math decomposition runs, its products, softmax and
// masks all device kernels, as a GPU without a fused kernel runs it.
#include "kernels/dispatch_stubs.h"

#include "kernels/attention.h"

#include <memory>

#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include "backend/backend.h"
#include "kernels/device_kernel_calls.h"

namespace torchplug {
namespace {

int64_t choice_for_the_device(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                              const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                              std::optional<double> scale, bool enable_gqa) {
  const c10::DeviceType type = query.device().type();
  const BackendIdentity* identity = find_backend(type);
  if (identity != nullptr && !identity->host_addressable && has_module_kernels(type)) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  return at::native::_fused_sdp_choice_stub(c10::DeviceType::CPU, query, key, value, attn_mask, dropout_p, is_causal,
                                            scale, enable_gqa);
}

}  // namespace

void register_privateuse1_attention() {
  at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&choice_for_the_device);
}

// The stub has no HPU slot, and without a kernel the choice would reach the
// CPU fallback, which torch.compile's fake tensors cannot go through.
void register_hpu_attention() {
  static const auto library =
      std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::HPU, __FILE__, __LINE__);
  library->impl("_fused_sdp_choice", TORCH_FN(choice_for_the_device));
}

}  // namespace torchplug
