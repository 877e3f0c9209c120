#pragma once

namespace torchplug {

// Installs the PrivateUse1 hooks (generators, pinned memory, device queries).
// Returns false when another library registered PrivateUse1 hooks first.
bool register_privateuse1_hooks();

}  // namespace torchplug
