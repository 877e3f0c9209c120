#pragma once

namespace torchplug {

// Device event timing for the legacy profiler on PrivateUse1. Idempotent.
void register_privateuse1_profiler_stubs();

}  // namespace torchplug
