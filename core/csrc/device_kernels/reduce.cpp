// Fills and sums.
#include <cstddef>
#include <cstdint>

#include "device_kernels/kernel_args.h"

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernels below

TORCHPLUG_DEVICE_KERNEL(torchplug_fill) {
  const auto [out, count, dtype, value] = args.read<void*, int64_t, int64_t, double>();
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    const auto stored = E::store(static_cast<typename E::value>(value));
    auto* o = E::at(out);
    for (int64_t i = 0; i < count; ++i) {
      o[i] = stored;
    }
    return 0;
  });
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
