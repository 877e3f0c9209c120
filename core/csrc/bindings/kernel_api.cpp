#include "bindings/kernel_api.h"

#include <cstdio>
#include <exception>
#include <vector>

#include "launch/kernel_launch.h"
#include "driver/memory_access.h"
#include "torchplug/kernel_api.h"

namespace torchplug {
namespace {

// Runs `body`, turning any exception into -1 and its message in `error`:
// nothing may cross the C table into a plugin.
template <typename Body>
int reporting_failures(char* error, size_t error_size, Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const std::exception& failure) {
    std::snprintf(error, error_size, "%s", failure.what());
  } catch (...) {
    std::snprintf(error, error_size, "%s", "unknown error");
  }
  return -1;
}

int open_access(const void* const* pointers, size_t count, void** scope, char* error, size_t error_size) {
  *scope = nullptr;
  if (!driver::strict_memory()) {
    return 0;
  }
  return reporting_failures(error, error_size, [&] {
    *scope = new driver::MemoryAccess(std::vector<const void*>(pointers, pointers + count));
  });
}

void close_access(void* scope) noexcept {
  delete static_cast<driver::MemoryAccess*>(scope);
}

int open_launch(const char* name, int device_type, int device_index, const void* const* pointers, size_t count,
                void** scope, char* error, size_t error_size) {
  *scope = nullptr;
  return reporting_failures(error, error_size, [&] {
    const c10::Device device(static_cast<c10::DeviceType>(device_type), static_cast<c10::DeviceIndex>(device_index));
    std::vector<const void*> memory;
    if (driver::strict_memory()) {
      memory.assign(pointers, pointers + count);
    }
    *scope = new KernelLaunch(name, device, memory);
  });
}

void close_launch(void* scope) noexcept { delete static_cast<KernelLaunch*>(scope); }

const TorchplugKernelApi kernel_api_table{TORCHPLUG_KERNEL_API_VERSION, &open_access, &close_access, &open_launch,
                                          &close_launch};

}  // namespace

pybind11::capsule kernel_api_capsule() {
  return pybind11::capsule(const_cast<TorchplugKernelApi*>(&kernel_api_table), TORCHPLUG_KERNEL_API_CAPSULE);
}

}  // namespace torchplug
