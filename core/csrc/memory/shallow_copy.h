#pragma once

namespace torchplug {

// Makes dense CPU and PrivateUse1 tensors shallow-copy compatible (for
// `param.data = ...` and torch._has_compatible_shallow_copy_type), as CPU and
// CUDA are, so nn.Module conversions keep Parameter identity. Once per process.
void register_shallow_copy_compatibility();

}  // namespace torchplug
