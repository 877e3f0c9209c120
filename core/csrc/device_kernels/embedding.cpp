// Rows picked by index: embedding lookups (index_select over the first
// dimension) and their gradient, and indexing and index_put over the first
// dimension.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

// The row that index `i` of int64 or int32 `indices` names, a negative index
// counting from the end where `wrap_negative`; -1, with the kernel failed,
// when it names no row.
int64_t row_at(KernelArgs& args, const void* indices, int64_t index_bytes, int64_t i, int64_t rows,
               bool wrap_negative = false) {
  const int64_t index =
      index_bytes == 8 ? static_cast<const int64_t*>(indices)[i] : static_cast<const int32_t*>(indices)[i];
  const int64_t row = wrap_negative && index < 0 ? index + rows : index;
  if (row >= 0 && row < rows) {
    return row;
  }
  args.fail("index %lld is out of bounds for dimension 0 with size %lld", static_cast<long long>(index),
            static_cast<long long>(rows));
  return -1;
}

int check_index_bytes(KernelArgs& args, int64_t index_bytes) {
  if (index_bytes != 8 && index_bytes != 4) {
    return args.fail("takes int64 or int32 indices, not %lld-byte ones", static_cast<long long>(index_bytes));
  }
  return 0;
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_index_rows) {
  const auto [out, table, indices, count, rows, row_bytes, index_bytes, wrap_negative] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, int64_t, int64_t>();
  if (!args.ok() || check_index_bytes(args, index_bytes) != 0) {
    return 1;
  }
  auto* destination = static_cast<char*>(out);
  const auto* source = static_cast<const char*>(table);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = row_at(args, indices, index_bytes, i, rows, wrap_negative != 0);
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
  if (args.ok() && check_index_bytes(args, index_bytes) != 0) {
    return 1;
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

TORCHPLUG_DEVICE_KERNEL(torchplug_index_put_rows) {
  const auto [self, values, indices, count, rows, row_bytes, index_bytes, accumulate, dtype] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>();
  if (!args.ok() || check_index_bytes(args, index_bytes) != 0) {
    return 1;
  }
  if (accumulate == 0) {
    auto* destination = static_cast<char*>(self);
    const auto* source = static_cast<const char*>(values);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = row_at(args, indices, index_bytes, i, rows, true);
      if (row < 0) {
        return 1;
      }
      std::memcpy(destination + row * row_bytes, source + i * row_bytes, static_cast<size_t>(row_bytes));
    }
    return 0;
  }
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    const int64_t columns = row_bytes / static_cast<int64_t>(sizeof(typename E::type));
    auto* accumulated = E::at(self);
    const auto* addends = E::at(values);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = row_at(args, indices, index_bytes, i, rows, true);
      if (row < 0) {
        return 1;
      }
      auto* target = accumulated + row * columns;
      const auto* addend = addends + i * columns;
      for (int64_t column = 0; column < columns; ++column) {
        target[column] = E::store(E::load(target[column]) + E::load(addend[column]));
      }
    }
    return 0;
  });
}

}  // namespace torchplug::device_kernels
