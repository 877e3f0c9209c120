#include "aten/backend.h"

#include <array>

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torchplug {
namespace {

constexpr size_t kDeviceTypes = static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES);
constexpr size_t kMaxDevices = runtime::Platform::kMaxDevices;

std::array<runtime::Platform*, kDeviceTypes> platforms{};
thread_local std::array<std::array<c10::StreamId, kMaxDevices>, kDeviceTypes> current_stream_ids{};
// Resolved runtime streams for current_stream_ids, so the per-kernel stream
// check is a load and an atomic compare.
thread_local std::array<std::array<runtime::Stream*, kMaxDevices>, kDeviceTypes> current_streams{};

}  // namespace

runtime::Platform* find_platform(c10::DeviceType type) {
  return platforms[static_cast<size_t>(type)];
}

runtime::Platform& platform_for(c10::DeviceType type) {
  runtime::Platform* platform = find_platform(type);
  TORCH_CHECK(platform != nullptr, "No torchplug backend is registered for device type ",
              c10::DeviceTypeName(type, /*lower_case=*/true),
              ". Install the backend's package, or check `torchplug doctor` for why it is inactive.");
  return *platform;
}

void bind_platform(c10::DeviceType type, runtime::Platform& platform) {
  platforms[static_cast<size_t>(type)] = &platform;
}

c10::DeviceIndex checked_device_index(c10::DeviceType type, c10::DeviceIndex index) {
  runtime::Platform& platform = platform_for(type);
  if (index < 0) {
    return static_cast<c10::DeviceIndex>(platform.current_device());
  }
  translate_runtime_errors([&] { platform.check_device(index); });
  return index;
}

c10::Stream current_stream(c10::Device device) {
  const c10::DeviceIndex index = checked_device_index(device.type(), device.index());
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(device.type(), index),
                     current_stream_ids[static_cast<size_t>(device.type())][index]);
}

void set_current_stream(c10::Stream stream) {
  const c10::DeviceIndex index = checked_device_index(stream.device_type(), stream.device_index());
  runtime::Stream& resolved = runtime_stream(c10::Stream(c10::Stream::UNSAFE, c10::Device(stream.device_type(), index), stream.id()));
  current_stream_ids[static_cast<size_t>(stream.device_type())][index] = stream.id();
  current_streams[static_cast<size_t>(stream.device_type())][index] = &resolved;
}

runtime::Stream& runtime_stream(c10::Stream stream) {
  return translate_runtime_errors([&]() -> runtime::Stream& {
    return platform_for(stream.device_type()).stream(stream.device_index(), stream.id());
  });
}

void wait_for_current_stream(c10::Device device) {
  const auto type_slot = static_cast<size_t>(device.type());
  runtime::Stream*& stream = current_streams[type_slot][device.index()];
  if (stream == nullptr || platforms[type_slot]->in_bad_fork()) {
    translate_runtime_errors([&] { platforms[type_slot]->check_usable(); });
    stream = &platforms[type_slot]->default_stream(device.index());
  }
  if (!stream->query()) {
    translate_runtime_errors([&] { stream->synchronize(); });
  }
}

}  // namespace torchplug
