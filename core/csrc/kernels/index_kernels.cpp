// Indexing by one index tensor over the first dimension on a device whose
// memory the host cannot address: `self[index]` (index.Tensor) and
// `self[index] = values` / `self.index_put_((index,), values, accumulate)`
// (_index_put_impl_, which index_put and the gradient of indexing run) as
// device kernels (device_kernels/embedding.cpp). Masks, several index
// tensors, a sliced self and accumulation into a type the kernels do not add
// take the copying fallback, whose CPU kernels raise torch's own errors.
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ExpandUtils.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_ops.h>

#include "kernels/cpu_fallback.h"
#include "kernels/device_copy.h"
#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

using IndexList = c10::List<std::optional<at::Tensor>>;

// The index tensor when `indices` is one integer tensor on `self`'s device
// indexing its first dimension, and `self` a contiguous tensor there with
// elements (an empty one leaves the bounds checks to the CPU's kernel).
std::optional<at::Tensor> first_dimension_index(const at::Tensor& self, const IndexList& indices) {
  if (indices.size() != 1 || self.numel() == 0 || self.device().is_cpu() || self.layout() != c10::kStrided ||
      !self.is_contiguous() || self.is_conj() || self.is_neg() || !has_module_kernels(self.device().type())) {
    return std::nullopt;
  }
  const std::optional<at::Tensor> index = indices.get(0);
  if (!index.has_value() || !kernel_indices(*index, self.device())) {
    return std::nullopt;
  }
  return index;
}

// The shape of `self[index]`: the index's shape, then self's after the first.
std::vector<int64_t> indexed_shape(const at::Tensor& self, const at::Tensor& index) {
  std::vector<int64_t> shape(index.sizes().begin(), index.sizes().end());
  shape.insert(shape.end(), self.sizes().begin() + 1, self.sizes().end());
  return shape;
}

// The dense keys the fallback runs under: self's device, or an index's when
// self is a host tensor.
c10::DispatchKeySet keys_of(const at::Tensor& self, const IndexList& indices) {
  if (self.device().is_cpu()) {
    for (const std::optional<at::Tensor> index : indices) {
      if (index.has_value() && index->defined() && !index->device().is_cpu()) {
        return fallback_keys(*index);
      }
    }
  }
  return fallback_keys(self);
}

at::Tensor index(const at::Tensor& self, const IndexList& indices) {
  if (const std::optional<at::Tensor> index = first_dimension_index(self, indices)) {
    at::Tensor result = at::empty(indexed_shape(self, *index), self.options());
    if (result.numel() > 0) {
      launch(dk::kIndexRows, self.device(),
             {pointer(result), pointer(self), pointer(*index), integer(index->numel()), integer(self.size(0)),
              integer(row_bytes(self)), integer(static_cast<int64_t>(index->element_size())), integer(1)});
    }
    return result;
  }
  return call_through_fallback<at::_ops::index_Tensor>(keys_of(self, indices), self, indices);
}

at::Tensor& index_put(at::Tensor& self, const IndexList& indices, const at::Tensor& values, bool accumulate,
                      bool unsafe) {
  const std::optional<at::Tensor> index = first_dimension_index(self, indices);
  // Values alias neither self nor the index (torch refuses that; the
  // fallback's CPU kernel says so), and broadcast to self[index]'s shape.
  const auto separate = [&](const at::Tensor& other) {
    return !other.has_storage() || !self.has_storage() || !self.storage().is_alias_of(other.storage());
  };
  if (index.has_value() && values.device() == self.device() && values.scalar_type() == self.scalar_type() &&
      (!accumulate || kernel_dtype(self.scalar_type()).has_value()) && separate(values) && separate(*index)) {
    const std::vector<int64_t> shape = indexed_shape(self, *index);
    if (at::is_expandable_to(values.sizes(), shape)) {
      const at::Tensor rows = contiguous_inside_device(values.expand(shape));
      if (rows.is_contiguous()) {
        if (rows.numel() > 0) {
          const c10::ScalarType type = self.scalar_type();
          launch(dk::kIndexPutRows, self.device(),
                 {pointer(self), pointer(rows), pointer(*index), integer(index->numel()), integer(self.size(0)),
                  integer(row_bytes(self)), integer(static_cast<int64_t>(index->element_size())),
                  integer(accumulate ? 1 : 0), integer(accumulate ? static_cast<int64_t>(*kernel_dtype(type)) : -1)});
        }
        return self;
      }
    }
  }
  return call_through_fallback<at::_ops::_index_put_impl_>(keys_of(self, indices), self, indices, values, accumulate,
                                                           unsafe);
}

}  // namespace

void register_index_module_kernels(DeviceKernels& library) {
  library.impl("index.Tensor", TORCH_FN(index));
  library.impl("_index_put_impl_", TORCH_FN(index_put));
}

}  // namespace torchplug
