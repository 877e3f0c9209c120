#pragma once
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace torchplug {

// The default generator of each device; created on first use.
const at::Generator& default_generator(c10::Device device);
at::Generator new_generator(c10::Device device);
// The CPU engine behind a device generator, for the host kernels that draw from it.
at::Generator engine_of(const at::Generator& device_generator);

}  // namespace torchplug
