#pragma once

namespace torchplug {

// Points the PrivateUse1 slots of the DispatchStubs that native kernels reach
// (see native_kernels.cpp) at the CPU's loops: device memory is host memory,
// so a TensorIterator over device tensors runs the CPU loop as it is.
// Idempotent. HPU has no stub slot; its calls take the fallback.
void serve_privateuse1_stubs_from_cpu();

}  // namespace torchplug
