// What attention masks are made of: a choice between two tensors by a
// boolean condition (where) and the triangle of a matrix (tril, triu).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device_kernels/kernel_args.h"
#include "device_kernels/strided_rows.h"

namespace torchplug::device_kernels {

TORCHPLUG_DEVICE_KERNEL(torchplug_where) {
  const auto [out, condition, a, b, dims, element_bytes] =
      args.read<void*, const void*, const void*, const void*, int64_t, int64_t>();
  if (dims < 1 || dims > kMaxBroadcastDims) {
    return args.fail("takes 1 to %lld dimensions, not %lld", static_cast<long long>(kMaxBroadcastDims),
                     static_cast<long long>(dims));
  }
  int64_t size[kMaxBroadcastDims] = {};
  int64_t out_step[kMaxBroadcastDims] = {};
  int64_t condition_step[kMaxBroadcastDims] = {};
  int64_t a_step[kMaxBroadcastDims] = {};
  int64_t b_step[kMaxBroadcastDims] = {};
  for (int64_t d = 0; d < dims; ++d) {
    const auto [extent, out_stride, condition_stride, a_stride, b_stride] =
        args.read<int64_t, int64_t, int64_t, int64_t, int64_t>();
    size[d] = extent;
    out_step[d] = out_stride * element_bytes;
    condition_step[d] = condition_stride;  // bool: one byte
    a_step[d] = a_stride * element_bytes;
    b_step[d] = b_stride * element_bytes;
  }
  if (!args.ok_for_elements_of(element_bytes)) {
    return 1;
  }
  const int64_t last = dims - 1;
  auto* to = static_cast<char*>(out);
  const auto* chosen = static_cast<const unsigned char*>(condition);
  const auto* first = static_cast<const char*>(a);
  const auto* second = static_cast<const char*>(b);
  const auto bytes = static_cast<size_t>(element_bytes);
  for_each_row<4>(dims, size, {out_step, condition_step, a_step, b_step}, [&](int64_t, const auto& offsets) {
    for (int64_t i = 0; i < size[last]; ++i) {
      const char* source = chosen[offsets[1] + i * condition_step[last]] != 0 ? first + offsets[2] + i * a_step[last]
                                                                             : second + offsets[3] + i * b_step[last];
      std::memcpy(to + offsets[0] + i * out_step[last], source, bytes);
    }
  });
  return 0;
}

TORCHPLUG_DEVICE_KERNEL(torchplug_triangle) {
  const auto [out, in, matrices, rows, columns, element_bytes, diagonal, upper] =
      args.read<void*, const void*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>();
  if (!args.ok_for_elements_of(element_bytes)) {
    return 1;
  }
  auto* to = static_cast<char*>(out);
  const auto* from = static_cast<const char*>(in);
  const int64_t row_bytes = columns * element_bytes;
  for (int64_t matrix = 0; matrix < matrices; ++matrix) {
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t offset = (matrix * rows + row) * row_bytes;
      // The kept columns of this row: [row + diagonal, columns) for triu, [0, row + diagonal] for tril.
      int64_t begin = 0;
      int64_t end = columns;
      if (upper != 0) {
        begin = row + diagonal < 0 ? 0 : (row + diagonal > columns ? columns : row + diagonal);
      } else {
        end = row + diagonal + 1 < 0 ? 0 : (row + diagonal + 1 > columns ? columns : row + diagonal + 1);
      }
      std::memset(to + offset, 0, static_cast<size_t>(row_bytes));
      std::memcpy(to + offset + begin * element_bytes, from + offset + begin * element_bytes,
                  static_cast<size_t>((end - begin) * element_bytes));
    }
  }
  return 0;
}

}  // namespace torchplug::device_kernels
