#pragma once
// What the CPU fallback and the queued host calls read from an operator's
// schema about its arguments.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace torchplug {

// A host tensor a device kernel accepts beside device data, as CUDA's do: an
// integral tensor passed as indices.
bool host_index_argument(const c10::Argument& argument, const at::Tensor& tensor);

// The copies, which write across devices on purpose (a device tensor copied
// into a host one); every other kernel writes on its device.
bool writes_across_devices(const c10::OperatorHandle& op);

}  // namespace torchplug
