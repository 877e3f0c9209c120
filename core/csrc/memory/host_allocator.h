#pragma once
#include <ATen/core/CachingHostAllocator.h>

namespace torchplug {

// Pinned host memory for `type`: what pin_memory() and non_blocking copies use.
at::HostAllocator& register_host_allocator(c10::DeviceType type);
// Host memory pinned through any torchplug device is pinned for all of them,
// as CUDA's pinned memory is for every CUDA device.
bool is_pinned_host_pointer(const void* pointer);

}  // namespace torchplug
