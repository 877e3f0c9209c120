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
// Per device type, per HostWait kind.
PerDeviceType<std::array<std::atomic<uint64_t>, 2>> waits;

}  // namespace

void set_sync_debug_mode(c10::DeviceType type, SyncDebugMode mode) {
  modes[static_cast<size_t>(type)].store(mode, std::memory_order_relaxed);
}

SyncDebugMode sync_debug_mode(c10::DeviceType type) {
  return modes[static_cast<size_t>(type)].load(std::memory_order_relaxed);
}

void note_host_wait(c10::Device device, HostWait kind, const char* operation, bool flag) {
  const HostWait counted = kind == HostWait::kDataDependent ? HostWait::kRequested : kind;
  waits[static_cast<size_t>(device.type())][static_cast<size_t>(counted)].fetch_add(1, std::memory_order_relaxed);
  const SyncDebugMode mode = sync_debug_mode(device.type());
  if (mode == SyncDebugMode::kDefault || !flag) {
    return;
  }
  const std::string type_name = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  const char* why = kind == HostWait::kImplicit ? ": it runs on the host and waited for the work queued on the stream"
                    : kind == HostWait::kDataDependent
                        ? ": the size of its result depends on the data, so the host waited for the work queued "
                          "on the stream"
                        : "";
  TORCH_CHECK(mode != SyncDebugMode::kError, "called a synchronizing ", type_name, " operation (", operation,
              " on ", device, why, ") while torch.", type_name,
              ".set_sync_debug_mode('error') is set. Use non_blocking=True with pinned memory, keep the value "
              "on the device, or allow it with torch.", type_name, ".set_sync_debug_mode('default').");
  TORCH_WARN("called a synchronizing ", type_name, " operation (", operation, " on ", device, why, ")");
}

HostWaitCounts host_wait_counts(c10::DeviceType type) {
  const auto& counts = waits[static_cast<size_t>(type)];
  return {counts[static_cast<size_t>(HostWait::kRequested)].load(std::memory_order_relaxed),
          counts[static_cast<size_t>(HostWait::kImplicit)].load(std::memory_order_relaxed)};
}

void reset_host_wait_counts(c10::DeviceType type) {
  for (auto& count : waits[static_cast<size_t>(type)]) {
    count.store(0, std::memory_order_relaxed);
  }
}

}  // namespace torchplug
