// Embedding lookups (index_select over the first dimension) and their gradient.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

// The row that index `i` of int64 or int32 `indices` names; -1, with the
// kernel failed, when it is outside [0, rows).
int64_t row_at(KernelArgs& args, const void* indices, int64_t index_bytes, int64_t i, int64_t rows) {
  const int64_t row =
      index_bytes == 8 ? static_cast<const int64_t*>(indices)[i] : static_cast<const int32_t*>(indices)[i];
  if (row >= 0 && row < rows) {
    return row;
  }
  args.fail("index %lld is out of range for a table of %lld rows (index out of range in self)",
            static_cast<long long>(row), static_cast<long long>(rows));
  return -1;
}

}  // namespace
}  // namespace torchplug::device_kernels

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernels below

TORCHPLUG_DEVICE_KERNEL(torchplug_index_rows) {
  const auto [out, table, indices, count, rows, row_bytes, index_bytes] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, int64_t>();
  if (!args.ok()) {
    return 1;
  }
  if (index_bytes != 8 && index_bytes != 4) {
    return args.fail("takes int64 or int32 indices, not %lld-byte ones", static_cast<long long>(index_bytes));
  }
  auto* destination = static_cast<char*>(out);
  const auto* source = static_cast<const char*>(table);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = row_at(args, indices, index_bytes, i, rows);
    if (row < 0) {
      return 1;
    }
    std::memcpy(destination + i * row_bytes, source + row * row_bytes, static_cast<size_t>(row_bytes));
  }
  return 0;
}

TORCHPLUG_DEVICE_KERNEL(torchplug_embedding_backward) {
  const auto [grad_weight, grad, indices, count, rows, columns, padding_idx, index_bytes, dtype] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>();
  if (args.ok() && index_bytes != 8 && index_bytes != 4) {
    return args.fail("takes int64 or int32 indices, not %lld-byte ones", static_cast<long long>(index_bytes));
  }
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    auto* accumulated = E::at(grad_weight);
    const auto* gradient = E::at(grad);
    std::memset(grad_weight, 0, static_cast<size_t>(rows * columns) * sizeof(typename E::type));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = row_at(args, indices, index_bytes, i, rows);
      if (row < 0) {
        return 1;
      }
      if (row == padding_idx) {
        continue;
      }
      auto* target = accumulated + row * columns;
      const auto* addend = gradient + i * columns;
      for (int64_t column = 0; column < columns; ++column) {
        target[column] = E::store(E::load(target[column]) + E::load(addend[column]));
      }
    }
    return 0;
  });
}
