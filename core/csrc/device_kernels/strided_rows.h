#pragma once
// The walk the strided kernels share: over the rows (the last dimension) of
// an iteration space of up to kMaxCopyDims / kMaxBroadcastDims dimensions,
// keeping each operand's offset by its own strides, so the kernel's body only
// runs along a row.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "device_kernels/kernel_abi.h"

namespace torchplug::device_kernels {

inline constexpr int64_t kMaxStridedDims = std::max(kMaxCopyDims, kMaxBroadcastDims);

// Calls `body(row, offsets)` for each row of the space `size` (`dims` of them,
// 1 <= dims <= kMaxStridedDims), where offsets[k] is operand k's offset of the
// row's first element: the sum of its index times steps[k] over the outer dimensions.
template <size_t N, typename Body>
void for_each_row(int64_t dims, const int64_t* size, const std::array<const int64_t*, N>& steps, Body&& body) {
  const int64_t last = dims - 1;
  int64_t rows = 1;
  for (int64_t d = 0; d < last; ++d) {
    rows *= size[d];
  }
  int64_t index[kMaxStridedDims] = {};
  std::array<int64_t, N> offsets{};
  for (int64_t row = 0; row < rows; ++row) {
    body(row, offsets);
    // The next row: an odometer over the outer dimensions.
    for (int64_t d = last - 1; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) {
        offsets[k] += steps[k][d];
      }
      if (++index[d] < size[d]) {
        break;
      }
      for (size_t k = 0; k < N; ++k) {
        offsets[k] -= steps[k][d] * size[d];
      }
      index[d] = 0;
    }
  }
}

}  // namespace torchplug::device_kernels
