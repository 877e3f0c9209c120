// Dropout's elementwise part, for a mask the host drew from the device's
// generator (kernels/dropout_kernels.cpp): the masks a CPU run with the same
// seed draws, so a model trains on the device as on the CPU.
#include <cstdint>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {

TORCHPLUG_DEVICE_KERNEL(torchplug_dropout) {
  const auto [out, in, mask, count, dtype, scale, round_scale] =
      args.read<void*, const void*, const void*, int64_t, int64_t, double, int64_t>();
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    using V = typename E::value;
    const V kept = round_scale != 0 ? E::load(E::store(static_cast<V>(scale))) : static_cast<V>(scale);
    auto* o = E::at(out);
    const auto* x = E::at(in);
    const auto* keep = static_cast<const uint8_t*>(mask);
    for (int64_t i = 0; i < count; ++i) {
      o[i] = E::store(E::load(x[i]) * (keep[i] != 0 ? kept : V(0)));
    }
    return 0;
  });
}

}  // namespace torchplug::device_kernels
