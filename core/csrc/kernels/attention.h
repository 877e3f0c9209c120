#pragma once

namespace torchplug {

// scaled_dot_product_attention on PrivateUse1 picks the fused kernel the CPU
// would pick (and runs it over the device tensors) instead of the math path.
void register_privateuse1_attention();
// The same choice on HPU, where torch offers no device slot for it.
void register_hpu_attention();

}  // namespace torchplug
