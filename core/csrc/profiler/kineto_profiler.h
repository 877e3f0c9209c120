#pragma once

namespace torchplug {

// Makes torch.profiler collect device activity (ProfilerActivity.PrivateUse1)
// from the simulated PrivateUse1 devices. Once per process.
void register_privateuse1_profiler();

}  // namespace torchplug
