// Fills, ranges and sums.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

// `count` words of type Word, each the first bytes of `pattern`: a loop the compiler vectorises.
template <typename Word>
void fill_words(void* out, int64_t count, const int64_t* pattern) {
  Word word;
  std::memcpy(&word, pattern, sizeof word);
  auto* o = static_cast<Word*>(out);
  for (int64_t i = 0; i < count; ++i) {
    o[i] = word;
  }
}

template <typename T>
void write_range(void* out, int64_t count, int64_t start, int64_t step) {
  auto* o = static_cast<T*>(out);
  for (int64_t i = 0; i < count; ++i) {
    o[i] = static_cast<T>(start + i * step);
  }
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_fill) {
  const auto [out, count, element_bytes, low, high] = args.read<void*, int64_t, int64_t, int64_t, int64_t>();
  if (!args.ok()) {
    return 1;
  }
  if (element_bytes < 1 || element_bytes > 16) {
    return args.fail("fills elements of 1 to 16 bytes, not %lld", static_cast<long long>(element_bytes));
  }
  const int64_t pattern[2] = {low, high};
  switch (element_bytes) {
    case 2:
      fill_words<uint16_t>(out, count, pattern);
      return 0;
    case 4:
      fill_words<uint32_t>(out, count, pattern);
      return 0;
    case 8:
      fill_words<uint64_t>(out, count, pattern);
      return 0;
    default:
      break;
  }
  auto* o = static_cast<char*>(out);
  const auto bytes = static_cast<size_t>(element_bytes);
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(o + i * element_bytes, pattern, bytes);
  }
  return 0;
}

TORCHPLUG_DEVICE_KERNEL(torchplug_arange) {
  const auto [out, count, type, start, step] = args.read<void*, int64_t, int64_t, int64_t, int64_t>();
  if (!args.ok()) {
    return 1;
  }
  // Indexed by RangeType.
  constexpr void (*kWriters[])(void*, int64_t, int64_t, int64_t) = {write_range<int64_t>, write_range<int32_t>,
                                                                    write_range<float>, write_range<double>};
  if (type >= 0 && type < static_cast<int64_t>(std::size(kWriters))) {
    kWriters[type](out, count, start, step);
    return 0;
  }
  return args.fail("has no range type %lld", static_cast<long long>(type));
}

TORCHPLUG_DEVICE_KERNEL(torchplug_sum) {
  const auto [out, in, outer, reduce, inner, dtype] =
      args.read<void*, const void*, int64_t, int64_t, int64_t, int64_t>();
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    // Sums in double: the order differs from the CPU's, the error must not grow with `reduce`.
    for (int64_t a = 0; a < outer; ++a) {
      const auto* block = E::at(in) + a * reduce * inner;
      for (int64_t i = 0; i < inner; ++i) {
        double total = 0.0;
        for (int64_t r = 0; r < reduce; ++r) {
          total += static_cast<double>(E::load(block[r * inner + i]));
        }
        E::at(out)[a * inner + i] = E::store(static_cast<typename E::value>(total));
      }
    }
    return 0;
  });
}

}  // namespace torchplug::device_kernels
