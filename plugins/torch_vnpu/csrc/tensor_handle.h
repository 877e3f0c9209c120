#pragma once
// A tensor as torch's boxed calling convention hands it to a stable-ABI
// kernel: an AtenTensorHandle the kernel owns. torch::stable::Tensor wraps
// each handle in a shared_ptr, an allocation per argument and result, and
// asks torch for the element type by trying each type's code in turn; over
// 4 elements that costs more than the kernel (tools/bench_stable_abi.py).
// TensorHandle owns the handle bare, reads each property with one call of
// torch's C shim, and maps the shim's codes of element and device types with
// codes it asked torch for once.
#include <cstdint>
#include <utility>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

namespace torch_vnpu {

// The element type and the device type the C shim's codes name.
torch::headeronly::ScalarType element_type(int32_t code);
torch::headeronly::DeviceType device_type_of(int32_t code);

class TensorHandle {
 public:
  explicit TensorHandle(AtenTensorHandle handle) noexcept : handle_(handle) {}
  // A new handle to the tensor `tensor` refers to.
  explicit TensorHandle(const torch::stable::Tensor& tensor);
  TensorHandle(TensorHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  TensorHandle& operator=(TensorHandle&& other) = delete;
  TensorHandle(const TensorHandle&) = delete;
  TensorHandle& operator=(const TensorHandle&) = delete;
  ~TensorHandle();

  // Gives up ownership (a result goes back to torch this way).
  AtenTensorHandle release() noexcept { return std::exchange(handle_, nullptr); }
  // A torch::stable::Tensor of the same tensor, for torch::stable's calls.
  torch::stable::Tensor tensor() const;

  int64_t dim() const;
  torch::headeronly::IntHeaderOnlyArrayRef sizes() const;
  int64_t numel() const;
  bool is_contiguous() const;
  // The C shim's code of the element type (aoti_torch_dtype_float32(), ...).
  int32_t dtype() const;
  // The C shim's code of the device type (aoti_torch_device_type_cpu(), ...).
  int32_t device_type() const;
  torch::stable::DeviceIndex device_index() const;
  void* data() const;

 private:
  AtenTensorHandle handle_;
};

}  // namespace torch_vnpu
