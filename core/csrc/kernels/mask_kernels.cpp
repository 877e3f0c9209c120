// What attention masks are made of, on a device whose memory the host cannot
// address: where(condition, a, b) over a boolean condition and two tensors of
// one type, broadcast as on the CPU, and tril/triu, as device kernels
// (device_kernels/masks.cpp). Operands of two types (which the CPU promotes)
// or on the host take the copying fallback.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/tril_ops.h>
#include <ATen/ops/triu_ops.h>
#include <ATen/ops/where_ops.h>

#include "device_kernels/kernel_abi.h"
#include "kernels/cpu_fallback.h"
#include "kernels/device_copy.h"
#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

bool plain_on(const at::Tensor& tensor, c10::Device device) {
  return tensor.device() == device && tensor.layout() == c10::kStrided && !tensor.is_conj() && !tensor.is_neg() &&
         !tensor.is_quantized();
}

// A tensor of `tensor`'s shape and strides that holds no memory, of one type
// for all the operands (the iterator computes layouts alone then).
at::Tensor meta_of(const at::Tensor& tensor, c10::ScalarType type) {
  return at::empty_strided(tensor.sizes(), tensor.strides(), tensor.options().device(c10::kMeta).dtype(type));
}

at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const c10::Device device = self.device();
  if (!device.is_cpu() && has_module_kernels(device.type()) && condition.scalar_type() == c10::kBool &&
      self.scalar_type() == other.scalar_type() && plain_on(condition, device) && plain_on(self, device) &&
      plain_on(other, device)) {
    // The result's shape and layout as the CPU's where gives them: its iterator's, over meta tensors.
    const c10::ScalarType type = self.scalar_type();
    at::TensorIterator iter = at::TensorIteratorConfig()
                                  .add_owned_output(at::Tensor())
                                  .add_owned_const_input(meta_of(condition, type))
                                  .add_owned_const_input(meta_of(self, type))
                                  .add_owned_const_input(meta_of(other, type))
                                  .build();
    const at::Tensor& layout = iter.output();
    if (layout.dim() <= dk::kMaxBroadcastDims) {
      at::Tensor out = at::empty_strided(layout.sizes(), layout.strides(), self.options());
      if (out.numel() > 0) {
        const at::Tensor operands[] = {out, condition.expand(out.sizes()), self.expand(out.sizes()),
                                       other.expand(out.sizes())};
        const int64_t dims = std::max<int64_t>(out.dim(), 1);
        std::vector<TPD_KernelArg> args{pointer(out),  pointer(condition),   pointer(self),
                                        pointer(other), integer(dims), integer(static_cast<int64_t>(out.element_size()))};
        for (int64_t d = 0; d < dims; ++d) {
          args.push_back(integer(out.dim() == 0 ? 1 : out.size(d)));
          for (const at::Tensor& operand : operands) {
            args.push_back(integer(out.dim() == 0 ? 0 : operand.stride(d)));
          }
        }
        launch(dk::kWhere, device, args.data(), args.size());
      }
      return out;
    }
  }
  return call_through_fallback<at::_ops::where_self>(fallback_keys(condition, self, other), condition, self, other);
}

template <typename Op, bool kUpper>
at::Tensor triangle(const at::Tensor& self, int64_t diagonal) {
  const c10::Device device = self.device();
  if (self.dim() >= 2 && !device.is_cpu() && has_module_kernels(device.type()) && plain_on(self, device)) {
    const at::Tensor input = contiguous_inside_device(self);
    if (input.is_contiguous()) {
      at::Tensor out = at::empty(self.sizes(), self.options());
      if (out.numel() > 0) {
        const int64_t rows = self.size(-2);
        const int64_t columns = self.size(-1);
        launch(dk::kTriangle, device,
               {pointer(out), pointer(input), integer(self.numel() / (rows * columns)), integer(rows),
                integer(columns), integer(static_cast<int64_t>(self.element_size())), integer(diagonal),
                integer(kUpper ? 1 : 0)});
      }
      return out;
    }
  }
  return call_through_fallback<Op>(fallback_keys(self), self, diagonal);
}

}  // namespace

void register_mask_module_kernels(DeviceKernels& library) {
  library.impl("where.self", TORCH_FN(where));
  library.impl("tril", TORCH_FN((triangle<at::_ops::tril, false>)));
  library.impl("triu", TORCH_FN((triangle<at::_ops::triu, true>)));
}

}  // namespace torchplug
