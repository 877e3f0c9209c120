#pragma once
#include <c10/core/CachingDeviceAllocator.h>

namespace torchplug {

// The caching allocator over the runtime's device memory for `type`, with the
// statistics torch.accelerator reports; created and installed on first use.
c10::DeviceAllocator& device_allocator(c10::DeviceType type);

// True when `data` came from a device allocator (not adopted host memory of
// another owner, such as memory shared between processes).
bool allocated_by_device_allocator(const c10::DataPtr& data);

// The share of `device`'s capacity this process may reserve (default 1.0);
// allocations beyond it raise torch.OutOfMemoryError.
void set_memory_fraction(c10::DeviceType type, c10::DeviceIndex device, double fraction);
double memory_fraction(c10::DeviceType type, c10::DeviceIndex device);

// Takes over a host allocation (a CPU kernel's fresh output) as device memory
// of `device`, counted against its capacity and statistics.
c10::DataPtr adopt_as_device_memory(c10::DataPtr host_data, size_t nbytes, c10::Device device);

}  // namespace torchplug
