// Fills and sums.
#include <cstddef>
#include <cstdint>

#include "device_kernels/kernel_args.h"

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernels below

TORCHPLUG_KERNEL torchplug_fill(const TPD_KernelArg* argv, size_t argc, char* message, size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* out = args.pointer();
  const int64_t count = args.integer();
  const int64_t dtype = args.integer();
  const double value = args.number();
  if (!args.ok()) {
    return 1;
  }
  return with_dtype(args, dtype, [&](auto element) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    const T stored = C::store(static_cast<typename C::type>(value));
    auto* o = static_cast<T*>(out);
    for (int64_t i = 0; i < count; ++i) {
      o[i] = stored;
    }
    return 0;
  });
}

TORCHPLUG_KERNEL torchplug_sum(const TPD_KernelArg* argv, size_t argc, char* message, size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* out = args.pointer();
  const void* in = args.pointer();
  const int64_t outer = args.integer();
  const int64_t reduce = args.integer();
  const int64_t inner = args.integer();
  const int64_t dtype = args.integer();
  if (!args.ok()) {
    return 1;
  }
  return with_dtype(args, dtype, [&](auto element) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    auto* o = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(in);
    // Sums in double: the order differs from the CPU's, the error must not grow with `reduce`.
    for (int64_t a = 0; a < outer; ++a) {
      const T* block = x + a * reduce * inner;
      for (int64_t i = 0; i < inner; ++i) {
        double total = 0.0;
        for (int64_t r = 0; r < reduce; ++r) {
          total += static_cast<double>(C::load(block[r * inner + i]));
        }
        o[a * inner + i] = C::store(static_cast<typename C::type>(total));
      }
    }
    return 0;
  });
}
