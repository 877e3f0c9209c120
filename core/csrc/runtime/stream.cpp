#include "runtime/stream.h"

#include <chrono>
#include <utility>

#include "runtime/errors.h"
#include "runtime/spin_wait.h"

namespace torchplug::runtime {
namespace {

// How long an idle stream's worker polls for work before it sleeps: longer
// than a waiting thread's kPollBeforeSleeping, because a program issues
// kernels in bursts with gaps of its own (Python code between two layers,
// the optimizer's bookkeeping) that last up to a few hundred microseconds, and
// each time the worker slept in such a gap the next launch paid for waking it
// (tens of microseconds of the launching thread's time on virtual machines).
// Measured on training steps of small transformers: polling 50 us woke the
// worker about five times a step and made steps 2-4% slower than 200 us,
// beyond which nothing changed.
constexpr std::chrono::microseconds kIdleWorkerPoll{200};

}  // namespace

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
  if (recording_) {
    recording_->push_back(std::move(task));
    return;
  }
  if (!worker_.joinable()) {
    worker_ = std::thread([this] { run(); });
  }
  queue_.push_back(std::move(task));
  submitted_.fetch_add(1, std::memory_order_release);
  work_ready_.notify_one();
}

void Stream::begin_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recording_) {
    throw RuntimeError("The stream is capturing a graph already; end that capture before beginning another.");
  }
  recording_ = std::make_unique<Recording>();
  capturing_.store(true, std::memory_order_release);
}

std::shared_ptr<const Stream::Recording> Stream::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!recording_) {
    throw RuntimeError("The stream is not capturing a graph; begin a capture before ending one.");
  }
  capturing_.store(false, std::memory_order_release);
  return std::shared_ptr<const Recording>(std::move(recording_));
}

void Stream::enqueue_recorded(std::shared_ptr<const Recording> recording) {
  enqueue([recording = std::move(recording)] {
    std::exception_ptr first_error;
    for (const auto& task : *recording) {
      try {
        task();
      } catch (...) {
        if (!first_error) {
          first_error = std::current_exception();
        }
      }
    }
    if (first_error) {
      std::rethrow_exception(first_error);
    }
  });
}

void Stream::synchronize() {
  wait_idle();
  std::unique_lock<std::mutex> lock(mutex_);
  if (error_) {
    std::exception_ptr error = std::exchange(error_, nullptr);
    has_error_.store(false, std::memory_order_release);
    std::rethrow_exception(error);
  }
}

std::exception_ptr Stream::pending_error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

bool Stream::forget_error(const std::exception_ptr& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ != error) {
    return false;
  }
  error_ = nullptr;
  has_error_.store(false, std::memory_order_release);
  return true;
}

void Stream::wait_idle() {
  const uint64_t target = submitted_.load(std::memory_order_acquire);
  if (poll_until([&] { return completed_.load(std::memory_order_acquire) >= target; })) {
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= target; });
}

void Stream::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (queue_.empty() && !stopping_) {
      lock.unlock();
      poll_until([&] { return submitted_.load(std::memory_order_acquire) > completed_.load(std::memory_order_relaxed); },
                 kIdleWorkerPoll);
      lock.lock();
    }
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
      has_error_.store(true, std::memory_order_release);
    }
    completed_.fetch_add(1, std::memory_order_release);
    work_done_.notify_all();
  }
}

}  // namespace torchplug::runtime
