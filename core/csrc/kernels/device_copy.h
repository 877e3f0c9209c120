#pragma once
// Copies between tensors of one device whose memory the host cannot address,
// run inside the device by the core's strided-copy kernel
// (device_kernels/copy.cpp) rather than through host copies of both sides.
#include <ATen/core/Tensor.h>

namespace torchplug {

// Runs `dst.copy_(src)` as the device kernel when it covers the call: both on
// one device that runs the core's kernels, one element type, no lazy
// conjugate or negation, `src` broadcastable to `dst`, no memory shared
// between them and no element of `dst` written twice. False, having done
// nothing, otherwise.
bool copy_inside_device(const at::Tensor& src, const at::Tensor& dst);

}  // namespace torchplug
