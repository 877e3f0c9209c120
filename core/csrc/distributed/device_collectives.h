#pragma once
// A c10d backend for torchplug's devices. Every collective runs through a
// Gloo backend that owns the transport (real processes, real sockets,
// PyTorch's own implementation of each algorithm) on CPU tensors: where
// device memory is host memory, CPU tensors that alias the device tensors (no
// copy); on a device whose memory the host cannot address, host copies made
// in stream order, whose results are copied back once the transport
// succeeded (as Gloo itself stages CUDA tensors).
#include <functional>
#include <optional>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/shape_agreement.h"

namespace torchplug::distributed {

// The name users pass to init_process_group (e.g. "cpu:gloo,foo:torchplug").
inline constexpr const char* kBackendName = "torchplug";

// Gloo has no ReduceOp.AVG: the transport sums, and the handle divides once
// the sum arrived.
struct Average {
  bool requested = false;
  c10d::ReduceOp transport_op;
};

class DeviceCollectives final : public c10d::Backend {
 public:
  // `transport` and `checks` are Gloo backends of the same rank and size,
  // each created on a store of its own; they only ever see CPU tensors.
  // `checks` carries the shape agreement that precedes each collective.
  // Tensors of the `staged` device types (memory the host cannot address)
  // cross as host copies.
  DeviceCollectives(c10::intrusive_ptr<c10d::Backend> transport, c10::intrusive_ptr<c10d::Backend> checks,
                    int rank, int size, const std::vector<c10::DeviceType>& staged = {});

  const std::string getBackendName() const override { return kBackendName; }
  bool supportsCoalescing() const override { return false; }
  void setBoundDeviceId(std::optional<at::Device> device) override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  // Sequence numbers are the transport's: TORCH_DISTRIBUTED_DEBUG=DETAIL's
  // consistency checks (mismatched collectives and shapes) rely on them.
  void setSequenceNumberForGroup() override { transport_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return transport_->getSequenceNumberForGroup(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  c10::intrusive_ptr<c10d::Backend> transport() const { return transport_; }

 private:
  // Checks that `tensors` live on the device this group drives, waits for the
  // work queued on that device's current stream, and returns CPU aliases (or
  // host copies, for a staged device type).
  std::vector<at::Tensor> host_views(const char* collective, const std::vector<at::Tensor>& tensors);
  std::vector<std::vector<at::Tensor>> host_views(const char* collective,
                                                  const std::vector<std::vector<at::Tensor>>& tensors);
  at::Tensor host_view(const char* collective, const at::Tensor& tensor);
  void check_device(const char* collective, const at::Tensor& tensor);
  // One of the transport's collectives.
  template <typename... Args>
  using TransportCall = c10::intrusive_ptr<c10d::Work> (c10d::Backend::*)(Args...);
  // A reduction whose result replaces `tensors` (all_reduce, reduce): the
  // transport sums an average, and the handle divides it where the result
  // arrives (on every rank, or on the root only: `receives_result`).
  template <typename CollectiveOptions>
  c10::intrusive_ptr<c10d::Work> reduce_in_place(
      const char* collective, c10d::OpType op_type, std::vector<at::Tensor>& tensors, const CollectiveOptions& opts,
      bool receives_result, TransportCall<std::vector<at::Tensor>&, const CollectiveOptions&> transport_call);
  // all_gather and its coalesced form.
  c10::intrusive_ptr<c10d::Work> gather_into_lists(
      const char* collective, c10d::OpType op_type, std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts,
      TransportCall<std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&, const c10d::AllgatherOptions&>
          transport_call);
  bool stages(const at::Tensor& tensor) const { return staged_[static_cast<size_t>(tensor.device().type())]; }
  // The handle of a collective whose results the transport writes into
  // `host_outputs` (the host views of `outputs`, or none when nothing comes
  // back): once it succeeded, `finish` runs, then staged results are copied
  // into their device tensors.
  c10::intrusive_ptr<c10d::Work> work(c10::intrusive_ptr<c10d::Work> transport_work, std::vector<at::Tensor> outputs,
                                      std::vector<at::Tensor> host_outputs, c10d::OpType op_type,
                                      std::function<void()> finish = {});
  // The handle of a reduction; for an average, it divides `host_outputs` by the world size.
  c10::intrusive_ptr<c10d::Work> reduction_work(c10::intrusive_ptr<c10d::Work> transport_work,
                                                std::vector<at::Tensor> outputs, c10d::OpType op_type,
                                                const Average& average, std::vector<at::Tensor> host_outputs);

  c10::intrusive_ptr<c10d::Backend> transport_;
  ShapeAgreement agreement_;
  std::vector<std::optional<at::Device>> devices_;  // per device type: the device bound to this group
  std::vector<bool> staged_;                        // per device type: crosses as host copies
};

}  // namespace torchplug::distributed
