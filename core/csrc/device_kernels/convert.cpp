// Conversions between element types, inside the device.
#include <cstdint>
#include <type_traits>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

// A stored element read as the type it converts from: bfloat16 as its float.
template <typename T>
auto value_of(T stored) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return widen(stored);
  } else {
    return stored;
  }
}

template <typename To, typename From>
To convert(From stored) {
  const auto value = value_of(stored);
  if constexpr (std::is_same_v<To, BFloat16>) {
    return narrow(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != 0;
  } else if constexpr (std::is_same_v<To, uint8_t> && std::is_floating_point_v<decltype(value)>) {
    // As c10's cast: through int64, so a negative value wraps rather than being undefined.
    return static_cast<uint8_t>(static_cast<int64_t>(value));
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_convert) {
  const auto [out, in, count, out_type, in_type] = args.read<void*, const void*, int64_t, int64_t, int64_t>();
  if (!args.ok()) {
    return 1;
  }
  const bool known = with_element_type(out_type, false, [&](auto to) {
    return with_element_type(in_type, false, [&](auto from) {
      using To = decltype(to);
      using From = decltype(from);
      auto* destination = static_cast<To*>(out);
      const auto* source = static_cast<const From*>(in);
      for (int64_t i = 0; i < count; ++i) {
        destination[i] = convert<To>(source[i]);
      }
      return true;
    });
  });
  return known ? 0
               : args.fail("converts between element types 0 to %lld, not from %lld to %lld",
                           static_cast<long long>(kDTypeCount - 1), static_cast<long long>(in_type),
                           static_cast<long long>(out_type));
}

}  // namespace torchplug::device_kernels
