#pragma once
#include <memory>
#include <optional>

#include <c10/core/CachingDeviceAllocator.h>

#include "memory/segment_source.h"

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

// Private memory pools, as CUDA's caching allocator has them for graphs and
// MemPool. A pool's free memory is reused only by allocations routed to it,
// and stays reserved (even through empty_cache) while the pool has users.
// Routes the allocations on `stream` of `device` (without a stream: those of
// the calling thread) to `pool`, and counts the route as a user of it.
void begin_allocate_to_pool(c10::Device device, c10::MempoolId_t pool, std::optional<c10::StreamId> stream);
// Ends the latest such route to `pool` (the pool keeps the user it counted).
void end_allocate_to_pool(c10::Device device, c10::MempoolId_t pool);
void retain_pool(c10::Device device, c10::MempoolId_t pool);
// Drops a user of `pool`; after the last, its memory joins the default pool.
void release_pool(c10::Device device, c10::MempoolId_t pool);
// A new pool id, {0, n} as torch's graph_pool_handle gives them.
c10::MempoolId_t new_pool_id();

// Pluggable allocators, on devices whose memory the host addresses. From now
// on every allocation of `type`'s default pools is a segment of `source`,
// given back to it when freed (change_current_allocator: before the first
// allocation only).
void use_segment_source(c10::DeviceType type, std::shared_ptr<const SegmentSource> source);
// The segments of private pool `pool` come from `source` (a MemPool's allocator).
void set_pool_source(c10::Device device, c10::MempoolId_t pool, std::shared_ptr<const SegmentSource> source);

}  // namespace torchplug
