#pragma once
#include <c10/core/DeviceType.h>

namespace torch {
class Library;
}  // namespace torch

namespace torchplug {

struct BackendIdentity;

// torch.autocast for `backend`: CUDA's per-operator cast policies on the
// device type's Autocast key. Idempotent.
void register_autocast(const BackendIdentity& backend);

// The policies, registered on a library of kType's Autocast key (the
// operator lists are macros that need the device type at compile time).
template <c10::DeviceType kType>
void register_autocast_policies(torch::Library& library);

}  // namespace torchplug
