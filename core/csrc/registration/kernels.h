#pragma once

namespace torchplug {

struct BackendIdentity;

// Registers the native kernels (allocation, views, copies) and the aliasing
// CPU fallback for every other operator on `backend`'s dispatch keys.
void register_kernels(const BackendIdentity& backend);

}  // namespace torchplug
