#pragma once
#include <ATen/core/CachingHostAllocator.h>

namespace torchplug {

// Pinned host memory for `type`: what pin_memory() and non_blocking copies use.
at::HostAllocator& register_host_allocator(c10::DeviceType type);
bool is_pinned_host_pointer(c10::DeviceType type, const void* pointer);

}  // namespace torchplug
