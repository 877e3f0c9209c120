#pragma once
// Tables indexed by c10::DeviceType: the backends' per-type state (registry,
// generators, sync debug modes, collectives) is looked up by the tensor's type.
#include <array>
#include <cstddef>

#include <c10/core/DeviceType.h>

namespace torchplug {

inline constexpr size_t kDeviceTypeCount = static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES);

template <typename T>
using PerDeviceType = std::array<T, kDeviceTypeCount>;

}  // namespace torchplug
