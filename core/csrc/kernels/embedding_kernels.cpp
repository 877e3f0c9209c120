// Embedding lookups on a device whose memory the host cannot address:
// index_select over the first dimension of a contiguous table (what
// nn.Embedding's forward calls) and embedding_dense_backward as device kernels
// (device_kernels/embedding.cpp); any other call takes the copying fallback.
#include <cstdint>

#include <ATen/core/Tensor.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select_ops.h>
#include <c10/core/WrapDimMinimal.h>

#include "kernels/cpu_fallback.h"
#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt num_weights,
                                    c10::SymInt padding_idx, bool scale_grad_by_freq) {
  const std::optional<int64_t> rows = num_weights.maybe_as_int();
  const std::optional<int64_t> padding = padding_idx.maybe_as_int();
  if (!scale_grad_by_freq && rows && padding && grad_output.dim() >= 1 &&
      dense_on(grad_output, grad_output.device()) && grad_output.is_contiguous() &&
      kernel_indices(indices, grad_output.device()) &&
      grad_output.numel() == indices.numel() * grad_output.size(-1)) {
    const int64_t columns = grad_output.size(-1);
    at::Tensor grad_weight = at::empty({*rows, columns}, grad_output.options());
    if (grad_weight.numel() > 0) {
      launch(dk::kEmbeddingBackward, grad_output.device(),
             {pointer(grad_weight), pointer(grad_output), pointer(indices), integer(indices.numel()), integer(*rows),
              integer(columns), integer(*padding), integer(static_cast<int64_t>(indices.element_size())),
              dtype_of(grad_output)});
    }
    return grad_weight;
  }
  return call_through_fallback<at::_ops::embedding_dense_backward>(fallback_keys(grad_output, indices), grad_output,
                                                                   indices, num_weights, padding_idx,
                                                                   scale_grad_by_freq);
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  if (self.dim() >= 1 && c10::maybe_wrap_dim(dim, self.dim()) == 0 && dense_on(self, self.device()) &&
      self.is_contiguous() && index.dim() <= 1 && kernel_indices(index, self.device())) {
    auto sizes = self.sizes().vec();
    sizes[0] = index.numel();
    at::Tensor result = at::empty(sizes, self.options());
    if (result.numel() > 0) {
      launch(dk::kIndexRows, self.device(),
             {pointer(result), pointer(self), pointer(index), integer(index.numel()), integer(self.size(0)),
              integer(row_bytes(self)), integer(static_cast<int64_t>(index.element_size())), integer(0)});
    }
    return result;
  }
  return call_through_fallback<at::_ops::index_select>(fallback_keys(self, index), self, dim, index);
}

}  // namespace

void register_embedding_module_kernels(DeviceKernels& library) {
  library.impl("index_select", TORCH_FN(index_select));
  library.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
}

}  // namespace torchplug
