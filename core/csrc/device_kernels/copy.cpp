// Copies between strided views of device memory, inside the device.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device_kernels/kernel_args.h"
#include "device_kernels/strided_rows.h"

namespace torchplug::device_kernels {
namespace {

// A copy's iteration space: `size` per dimension, the two views' strides in bytes.
struct CopyShape {
  int64_t dims;
  int64_t size[kMaxCopyDims];
  int64_t dst_step[kMaxCopyDims];
  int64_t src_step[kMaxCopyDims];
};

// One row (the last dimension) of `count` elements of `bytes` bytes each: a
// single memcpy when both sides are dense along it, else element by element,
// through a fixed-size type where there is one so the compiler moves words.
template <typename Word>
void copy_row_of(char* dst, const char* src, int64_t count, int64_t dst_step, int64_t src_step) {
  for (int64_t i = 0; i < count; ++i) {
    Word word;
    std::memcpy(&word, src + i * src_step, sizeof word);
    std::memcpy(dst + i * dst_step, &word, sizeof word);
  }
}

void copy_row(char* dst, const char* src, int64_t count, int64_t bytes, int64_t dst_step, int64_t src_step) {
  if (dst_step == bytes && src_step == bytes) {
    std::memcpy(dst, src, static_cast<size_t>(count * bytes));
    return;
  }
  switch (bytes) {
    case 1:
      return copy_row_of<uint8_t>(dst, src, count, dst_step, src_step);
    case 2:
      return copy_row_of<uint16_t>(dst, src, count, dst_step, src_step);
    case 4:
      return copy_row_of<uint32_t>(dst, src, count, dst_step, src_step);
    case 8:
      return copy_row_of<uint64_t>(dst, src, count, dst_step, src_step);
    default:
      for (int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + i * dst_step, src + i * src_step, static_cast<size_t>(bytes));
      }
  }
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_strided_copy) {
  const auto [dst, src, dims, element_bytes] = args.read<void*, const void*, int64_t, int64_t>();
  if (dims < 1 || dims > kMaxCopyDims) {
    return args.fail("takes 1 to %lld dimensions, not %lld", static_cast<long long>(kMaxCopyDims),
                     static_cast<long long>(dims));
  }
  CopyShape shape{dims, {}, {}, {}};
  for (int64_t d = 0; d < dims; ++d) {
    const auto [size, dst_stride, src_stride] = args.read<int64_t, int64_t, int64_t>();
    shape.size[d] = size;
    shape.dst_step[d] = dst_stride * element_bytes;
    shape.src_step[d] = src_stride * element_bytes;
  }
  if (!args.ok_for_elements_of(element_bytes)) {
    return 1;
  }
  const int64_t last = dims - 1;
  auto* to = static_cast<char*>(dst);
  const auto* from = static_cast<const char*>(src);
  for_each_row<2>(dims, shape.size, {shape.dst_step, shape.src_step}, [&](int64_t, const auto& offsets) {
    copy_row(to + offsets[0], from + offsets[1], shape.size[last], element_bytes, shape.dst_step[last],
             shape.src_step[last]);
  });
  return 0;
}

}  // namespace torchplug::device_kernels
