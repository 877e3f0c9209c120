#pragma once
// Gloo aborts the receiving process when ranks pass tensors of different
// sizes to one collective ("Received data size doesn't match expected size",
// from a transport thread: nothing can catch it). Before each collective
// whose tensors must agree, the ranks exchange a small description of theirs
// over a Gloo group of its own, and every rank raises the same clear error
// when they disagree: no rank aborts, and the group stays usable.
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace torchplug::distributed {

class ShapeAgreement {
 public:
  // `checks` is a Gloo backend of the same rank and size, on a store of its own.
  explicit ShapeAgreement(c10::intrusive_ptr<c10d::Backend> checks);

  // Raises on every rank unless all ranks pass tensors of the same dtypes and shapes.
  void require(const char* collective, c10d::OpType op_type, const std::vector<at::Tensor>& tensors) const;

 private:
  c10::intrusive_ptr<c10d::Backend> checks_;
};

}  // namespace torchplug::distributed
