#pragma once
// Copies between tensors of one device whose memory the host cannot address,
// run inside the device by the core's strided-copy kernel
// (device_kernels/copy.cpp) rather than through host copies of both sides,
// and the operands of an elementwise kernel laid out by them.
#include <optional>

#include <ATen/core/Tensor.h>

namespace torchplug {

// Runs `dst.copy_(src)` as the device kernel when it covers the call: both on
// one device that runs the core's kernels, no lazy conjugate or negation,
// `src` broadcastable to `dst`, no memory shared between them and no element
// of `dst` written twice; of one element type, or of two the conversion
// kernel takes (bool, the integers, float32, float64, bfloat16) into a dense
// `dst`. False, having done nothing, otherwise.
bool copy_inside_device(const at::Tensor& src, const at::Tensor& dst);

// `tensor` as a kernel reading dense memory takes it: itself when contiguous,
// else a contiguous copy made inside the device, where copy_inside_device
// covers it (what the CPU's kernels read for a strided input too); any other
// tensor as it is, for the caller's checks to send to the fallback.
at::Tensor contiguous_inside_device(const at::Tensor& tensor);

// An elementwise kernel's operands over `self`, which it runs over as flat
// arrays: `out`, laid out as the CPU lays out the result of an operation on
// `self` alone (TensorIterator's rule: contiguous for a contiguous `self`, in
// the order of its strides otherwise), and `in`, `self` in that same layout
// (itself, or a copy made inside the device). nullopt for a tensor that is not
// a strided one of a type the kernels take on a device.
struct FlatOperands {
  at::Tensor out;
  at::Tensor in;
};
std::optional<FlatOperands> flat_operands(const at::Tensor& self);

}  // namespace torchplug
