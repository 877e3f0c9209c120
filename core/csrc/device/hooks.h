#pragma once

namespace torchplug {

// Installs the PrivateUse1 hooks (generators, pinned memory, device queries).
// Returns false when another library registered PrivateUse1 hooks first.
bool register_privateuse1_hooks();

// Registers the HPU hooks; must run before anything asks torch for them
// (the first lookup is cached). Returns false when HPU hooks already exist.
bool register_hpu_hooks();

}  // namespace torchplug
