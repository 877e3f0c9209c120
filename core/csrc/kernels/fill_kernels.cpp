// Fills and ranges on a device whose memory the host cannot address, as
// device kernels (device_kernels/reduce.cpp): fill_ and zero_ of any element
// type, the value converted by the CPU's own fill_, and arange over whole
// numbers (position ids); any other call takes the copying fallback.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/zero_ops.h>

#include "kernels/cpu_fallback.h"
#include "kernels/device_kernel_calls.h"
#include "registration/device_kernels.h"

namespace torchplug {
namespace {

// A tensor whose every element a flat fill of its memory writes once: dense in
// any order of its dimensions, of any type, with no lazy conjugate or negation.
bool fillable(const at::Tensor& self) {
  return !self.device().is_cpu() && self.layout() == c10::kStrided && self.is_non_overlapping_and_dense() &&
         !self.is_conj() && !self.is_neg() && !self.is_quantized() && self.element_size() <= 16;
}

at::Tensor& fill(at::Tensor& self, const c10::Scalar& value) {
  if (fillable(self)) {
    // The value as the CPU's fill_ converts it (and refuses it: an overflow fails here, at once).
    const at::Tensor element = at::empty({}, self.options().device(c10::kCPU)).fill_(value);
    int64_t pattern[2] = {0, 0};
    std::memcpy(pattern, element.const_data_ptr(), element.element_size());
    if (self.numel() > 0) {
      launch(dk::kFill, self.device(),
             {pointer(self), integer(self.numel()), integer(static_cast<int64_t>(self.element_size())),
              integer(pattern[0]), integer(pattern[1])});
    }
    return self;
  }
  return call_through_fallback<at::_ops::fill__Scalar>(fallback_keys(self), self, value);
}

// zero_ has a CPU kernel of its own, so it does not reach fill_ by itself.
at::Tensor& zero(at::Tensor& self) {
  if (fillable(self)) {
    return fill(self, 0);
  }
  return call_through_fallback<at::_ops::zero_>(fallback_keys(self), self);
}

// The kernel's type for a range into `type`, with the largest magnitude it
// holds every whole number up to.
std::optional<std::pair<dk::RangeType, double>> range_type(c10::ScalarType type) {
  switch (type) {
    case c10::kLong:
      return std::pair{dk::RangeType::kInt64, 0x1p53};  // exact through the doubles the size is computed in
    case c10::kInt:
      return std::pair{dk::RangeType::kInt32, 0x1p31 - 1};
    case c10::kFloat:
      return std::pair{dk::RangeType::kFloat32, 0x1p24};
    case c10::kDouble:
      return std::pair{dk::RangeType::kFloat64, 0x1p53};
    default:
      return std::nullopt;
  }
}

bool whole(const c10::Scalar& value, double limit) {
  if (value.isComplex()) {
    return false;
  }
  const double number = value.toDouble();
  return std::isfinite(number) && std::floor(number) == number && std::fabs(number) <= limit;
}

// arange over whole numbers that `out`'s type holds exactly (position ids,
// sequence offsets): the CPU's values whatever order computes them. `out`
// empty or of the range's size, dense; any other call (a fractional or
// inconsistent range, which the CPU reports) takes the fallback.
at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, at::Tensor& out) {
  const auto type = range_type(out.scalar_type());
  if (type && !out.device().is_cpu() && out.layout() == c10::kStrided && !out.is_conj() && !out.is_neg() &&
      whole(start, type->second) && whole(end, type->second) && whole(step, type->second) && step.toDouble() != 0) {
    const double first = start.toDouble();
    const double span = end.toDouble() - first;
    const double stride = step.toDouble();
    const int64_t size = span * stride < 0 ? -1 : static_cast<int64_t>(std::ceil(span / stride));
    if (size >= 0 && (out.numel() == size || out.numel() == 0)) {
      if (out.numel() != size) {
        out.resize_({size});
      }
      if (out.is_contiguous()) {
        if (size > 0) {
          launch(dk::kArange, out.device(),
                 {pointer(out), integer(size), code(type->first), integer(static_cast<int64_t>(first)),
                  integer(static_cast<int64_t>(stride))});
        }
        return out;
      }
    }
  }
  return call_through_fallback<at::_ops::arange_start_out>(fallback_keys(out), start, end, step, out);
}

}  // namespace

void register_fill_module_kernels(DeviceKernels& library) {
  library.impl("fill_.Scalar", TORCH_FN(fill));
  library.impl("zero_", TORCH_FN(zero));
  library.impl("arange.start_out", TORCH_FN(arange_out));
}

}  // namespace torchplug
