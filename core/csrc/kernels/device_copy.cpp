// Copies inside a device whose memory the host cannot address: copy_ between
// views of one device (what .contiguous() and clone of a view run), cat,
// whose inputs are copied into their places of the result, and the layout an
// elementwise kernel's operands take (flat_operands).
#include "kernels/device_copy.h"

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/WrapDimMinimal.h>

#include "device_kernels/kernel_abi.h"
#include "kernels/cpu_fallback.h"
#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

// A copy's dimensions with those of size 1 dropped and neighbours that are
// one run in both views merged, so a dense copy is one row.
struct CopyDims {
  std::vector<int64_t> size, dst_stride, src_stride;
};

CopyDims merged_dims(const at::Tensor& dst, const at::Tensor& src) {
  CopyDims dims;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    if (dst.size(d) == 1) {
      continue;
    }
    if (!dims.size.empty() && dims.dst_stride.back() == dst.stride(d) * dst.size(d) &&
        dims.src_stride.back() == src.stride(d) * dst.size(d)) {
      dims.size.back() *= dst.size(d);
      dims.dst_stride.back() = dst.stride(d);
      dims.src_stride.back() = src.stride(d);
      continue;
    }
    dims.size.push_back(dst.size(d));
    dims.dst_stride.push_back(dst.stride(d));
    dims.src_stride.push_back(src.stride(d));
  }
  if (dims.size.empty()) {  // one element
    dims = CopyDims{{1}, {1}, {1}};
  }
  return dims;
}

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

bool plain_strided(const at::Tensor& tensor) {
  return tensor.layout() == c10::kStrided && !tensor.is_conj() && !tensor.is_neg() && !tensor.is_quantized();
}

// cat of `tensors` along `dim` when they share one device that runs the
// core's kernels and one element type; torch's checks and result layout come
// from the same call on meta tensors, so an invalid call fails as on the CPU.
std::optional<at::Tensor> cat_inside_device(const at::ITensorListRef& tensors, int64_t dim) {
  const std::vector<at::Tensor> inputs(tensors.begin(), tensors.end());
  if (inputs.empty() || inputs.front().device().is_cpu() || !has_module_kernels(inputs.front().device().type())) {
    return std::nullopt;
  }
  std::vector<at::Tensor> shapes;
  for (const at::Tensor& input : inputs) {
    if (input.device() != inputs.front().device() || input.scalar_type() != inputs.front().scalar_type() ||
        !plain_strided(input) || input.dim() > dk::kMaxCopyDims) {
      return std::nullopt;
    }
    shapes.push_back(at::empty_strided(input.sizes(), input.strides(), input.options().device(c10::kMeta)));
  }
  const at::Tensor layout = at::_ops::cat::call(shapes, dim);
  at::Tensor out = at::empty_strided(layout.sizes(), layout.strides(), inputs.front().options());
  const int64_t axis = c10::maybe_wrap_dim(dim, out.dim());
  int64_t offset = 0;
  for (const at::Tensor& input : inputs) {
    if (input.dim() == 1 && input.numel() == 0) {
      continue;  // torch's legacy empty input, which cat skips
    }
    const at::Tensor place = out.narrow(axis, offset, input.size(axis));
    offset += input.size(axis);
    if (input.numel() > 0) {
      TORCH_INTERNAL_ASSERT(copy_inside_device(input, place), "cat's copy did not run inside the device");
    }
  }
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  if (auto out = cat_inside_device(tensors, dim)) {
    return *out;
  }
  const std::vector<at::Tensor> inputs(tensors.begin(), tensors.end());
  c10::DispatchKeySet keys;
  for (const at::Tensor& input : inputs) {
    if (!input.device().is_cpu()) {
      keys = fallback_keys(input);
      break;
    }
  }
  return call_through_fallback<at::_ops::cat>(keys, tensors, dim);
}


// dst.copy_(src) between two element types: `src` brought into dst's layout
// (itself when it has it, else a copy of its type made inside the device),
// then converted element by element into dense `dst`.
bool convert_inside_device(const at::Tensor& src, const at::Tensor& dst) {
  const std::optional<dk::DType> to = element_type(dst.scalar_type());
  const std::optional<dk::DType> from = element_type(src.scalar_type());
  if (!to || !from || !dst.is_non_overlapping_and_dense()) {
    return false;
  }
  at::Tensor staged = src;
  if (!same_dense_layout(src, dst)) {
    staged = at::empty_strided(dst.sizes(), dst.strides(), src.options());
    if (!copy_inside_device(src, staged)) {
      return false;
    }
  }
  if (dst.numel() > 0) {
    launch(dk::kConvert, dst.device(),
           {pointer(dst), pointer(staged), integer(dst.numel()), code(*to), code(*from)});
  }
  return true;
}

}  // namespace

bool copy_inside_device(const at::Tensor& src, const at::Tensor& dst) {
  const c10::Device device = dst.device();
  if (src.scalar_type() != dst.scalar_type() && !device.is_cpu() && src.device() == device && plain_strided(src) &&
      plain_strided(dst) && at::is_expandable_to(src.sizes(), dst.sizes()) &&
      !(src.has_storage() && dst.has_storage() && src.storage().is_alias_of(dst.storage())) &&
      has_module_kernels(device.type())) {
    return convert_inside_device(src, dst);
  }
  if (device.is_cpu() || src.device() != device || src.scalar_type() != dst.scalar_type() || !plain_strided(src) ||
      !plain_strided(dst) || !at::is_expandable_to(src.sizes(), dst.sizes()) ||
      at::has_internal_overlap(dst) == at::MemOverlap::Yes ||
      (src.has_storage() && dst.has_storage() && src.storage().is_alias_of(dst.storage())) ||
      !has_module_kernels(device.type())) {
    return false;
  }
  if (dst.numel() == 0) {
    return true;
  }
  const CopyDims dims = merged_dims(dst, src.expand(dst.sizes()));
  const auto count = static_cast<int64_t>(dims.size.size());
  if (count > dk::kMaxCopyDims) {
    return false;
  }
  std::vector<TPD_KernelArg> args{pointer(dst), pointer(src), integer(count),
                                  integer(static_cast<int64_t>(dst.element_size()))};
  for (int64_t d = 0; d < count; ++d) {
    args.insert(args.end(), {integer(dims.size[d]), integer(dims.dst_stride[d]), integer(dims.src_stride[d])});
  }
  launch(dk::kStridedCopy, device, args.data(), args.size());
  return true;
}

at::Tensor contiguous_inside_device(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.device().is_cpu() || tensor.is_contiguous()) {
    return tensor;
  }
  at::Tensor copy = at::empty(tensor.sizes(), tensor.options());
  return copy_inside_device(tensor, copy) ? copy : tensor;
}

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

void register_copy_module_kernels(DeviceKernels& library) { library.impl("cat", TORCH_FN(cat)); }

}  // namespace torchplug
