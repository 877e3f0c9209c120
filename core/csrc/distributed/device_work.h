#pragma once
// The handle of a collective on device tensors: completion, errors and
// timeouts come from the transport's work on the CPU aliases; results and
// futures hold the device tensors, so callers (DDP's reducer, functional
// collectives) never see the aliases.
#include <functional>
#include <mutex>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace torchplug::distributed {

class DeviceWork final : public c10d::Work {
 public:
  // `finish` runs once after the transport's work succeeded (e.g. the division
  // of ReduceOp.AVG, which Gloo lacks); it may be empty.
  DeviceWork(c10::intrusive_ptr<c10d::Work> transport_work, std::vector<at::Tensor> device_outputs,
             c10d::OpType op_type, int rank, std::function<void()> finish = {});

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void finish_once();

  c10::intrusive_ptr<c10d::Work> transport_work_;
  std::vector<at::Tensor> device_outputs_;
  std::function<void()> finish_;
  std::once_flag finished_;
  std::mutex future_mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torchplug::distributed
