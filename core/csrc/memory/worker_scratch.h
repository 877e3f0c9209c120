#pragma once
#include <cstddef>

namespace torchplug {

// Caches the large host buffers the CPU kernels of queued kernels allocate on
// a stream's worker (oneDNN's reordered weights, a functional kernel's result
// before it is copied into device memory), as a device's caching allocator
// caches device memory. Without it each such buffer went back to the worker's
// malloc arena at the end of its kernel, glibc gave the pages back to the
// kernel (it trims an arena whose free top passes a threshold it moves as
// the program runs), and the next step faulted every page in again: resnet18's
// step took 0.8x or 1.1x the CPU's depending on what ran before it in the
// process. Installed as the process's CPU allocator the first time a kernel
// is queued over host-addressable device memory; on every other thread, and
// for small buffers, it hands out what the allocator it wraps would.
void cache_worker_scratch();

// The cached buffers no kernel uses, in bytes (what empty_cache releases).
size_t cached_worker_scratch_bytes();
// Frees the cached buffers no kernel uses.
void release_worker_scratch();

}  // namespace torchplug
