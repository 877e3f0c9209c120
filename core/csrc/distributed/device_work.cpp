#include "distributed/device_work.h"

#include <ATen/core/ivalue_inl.h>

namespace torchplug::distributed {

DeviceWork::DeviceWork(c10::intrusive_ptr<c10d::Work> transport_work, std::vector<at::Tensor> device_outputs,
                       c10d::OpType op_type, int rank, std::function<void()> finish)
    : c10d::Work(rank, op_type),
      transport_work_(std::move(transport_work)),
      device_outputs_(std::move(device_outputs)),
      finish_(std::move(finish)) {}

void DeviceWork::finish_once() {
  std::call_once(finished_, [this] {
    if (finish_) {
      finish_();
    }
  });
}

bool DeviceWork::isCompleted() {
  const bool completed = transport_work_->isCompleted();
  if (completed && transport_work_->isSuccess()) {
    finish_once();
  }
  return completed;
}

bool DeviceWork::isSuccess() const { return transport_work_->isSuccess(); }

std::exception_ptr DeviceWork::exception() const { return transport_work_->exception(); }

int DeviceWork::sourceRank() const { return transport_work_->sourceRank(); }

std::vector<at::Tensor> DeviceWork::result() { return device_outputs_; }

void DeviceWork::synchronize() {
  transport_work_->synchronize();
  finish_once();
}

bool DeviceWork::wait(std::chrono::milliseconds timeout) {
  const bool done = transport_work_->wait(timeout);
  finish_once();
  return done;
}

void DeviceWork::abort() { transport_work_->abort(); }

c10::intrusive_ptr<c10::ivalue::Future> DeviceWork::getFuture() {
  std::lock_guard<std::mutex> lock(future_mutex_);
  if (!future_) {
    // A CPU future: the device tensors it carries are ready once the
    // transport finished and `finish` ran (which copies staged results back
    // with blocking copies), so no device events are needed.
    auto transport_future = transport_work_->getFuture();
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    transport_future->addCallback(
        [self = c10::intrusive_ptr<DeviceWork>::unsafe_reclaim_from_nonowning(this)](c10::ivalue::Future& done) {
          if (done.hasError()) {
            self->future_->setError(done.exception_ptr());
            return;
          }
          try {
            self->finish_once();
          } catch (...) {
            self->future_->setError(std::current_exception());
            return;
          }
          self->future_->markCompleted(c10::IValue(self->device_outputs_));
        });
  }
  return future_;
}

}  // namespace torchplug::distributed
