#pragma once
#include <c10/core/DeviceType.h>

namespace torchplug {

struct BackendIdentity;

// At activation (inside `import torch`): the factory kernels, the sparse
// factories and the aliasing CPU fallback on `backend`'s dispatch keys.
void register_kernels(const BackendIdentity& backend);

// Every other kernel of the device type (copies, native and host kernels,
// the routes to the fallback, autocast), registered when the type's first
// tensor is made: a dispatcher-wide pass and hundreds of registrations that
// a process which never uses the device does not pay for in `import torch`.
// Every way a tensor of the type comes to be calls it first (the device
// allocator, the storage-less factories, the fallback); none of these
// operators can be reached before. Cheap once done (one acquire load).
void ensure_kernels_registered(c10::DeviceType type);
bool kernels_registered(c10::DeviceType type);

}  // namespace torchplug
