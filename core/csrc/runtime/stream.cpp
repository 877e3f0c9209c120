#include "runtime/stream.h"

#include <utility>

namespace torchplug::runtime {

Stream::Stream(int device, int64_t id, int priority) : device_(device), id_(id), priority_(priority) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
}

void Stream::enqueue(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!worker_.joinable()) {
    worker_ = std::thread([this] { run(); });
  }
  queue_.push_back(std::move(task));
  submitted_.fetch_add(1, std::memory_order_release);
  work_ready_.notify_one();
}

void Stream::synchronize() {
  wait_idle();
  std::unique_lock<std::mutex> lock(mutex_);
  if (error_) {
    std::exception_ptr error = std::exchange(error_, nullptr);
    std::rethrow_exception(error);
  }
}

void Stream::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = submitted_.load(std::memory_order_acquire);
  work_done_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= target; });
}

void Stream::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {
      return;  // stopping and drained
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) {
      error_ = error;
    }
    completed_.fetch_add(1, std::memory_order_release);
    work_done_.notify_all();
  }
}

}  // namespace torchplug::runtime
