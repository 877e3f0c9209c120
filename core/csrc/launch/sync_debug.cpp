#include "launch/sync_debug.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <string>

#include <c10/util/Exception.h>

#include "backend/device_types.h"

namespace torchplug {
namespace {

// Zero-initialized (kDefault). Read on every blocking copy: one relaxed load.
PerDeviceType<std::atomic<SyncDebugMode>> modes;

}  // namespace

void set_sync_debug_mode(c10::DeviceType type, SyncDebugMode mode) {
  modes[static_cast<size_t>(type)].store(mode, std::memory_order_relaxed);
}

SyncDebugMode sync_debug_mode(c10::DeviceType type) {
  return modes[static_cast<size_t>(type)].load(std::memory_order_relaxed);
}

void check_synchronizing_operation(c10::Device device, const char* operation) {
  const SyncDebugMode mode = sync_debug_mode(device.type());
  if (mode == SyncDebugMode::kDefault) {
    return;
  }
  const std::string type_name = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  TORCH_CHECK(mode != SyncDebugMode::kError, "called a synchronizing ", type_name, " operation (", operation,
              " on ", device, ") while torch.", type_name,
              ".set_sync_debug_mode('error') is set. Use non_blocking=True with pinned memory, keep the value "
              "on the device, or allow it with torch.", type_name, ".set_sync_debug_mode('default').");
  TORCH_WARN("called a synchronizing ", type_name, " operation (", operation, " on ", device, ")");
}

}  // namespace torchplug
