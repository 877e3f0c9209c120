#pragma once
// A stream is an in-order queue of work executed by its own worker thread, so
// work on different streams overlaps while each stream keeps its order.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <memory>
#include <thread>
#include <vector>

namespace torchplug::runtime {

class Stream {
 public:
  Stream(int device, int64_t id, int priority);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  int64_t id() const { return id_; }
  int priority() const { return priority_; }

  // Queues `task`; it runs on this stream's worker after all work queued
  // before. While the stream captures, the task is recorded instead.
  void enqueue(std::function<void()> task);

  // Work recorded by a capture, replayed in order by enqueue_recorded.
  using Recording = std::vector<std::function<void()>>;
  // From now on the stream records what is queued on it instead of running
  // it (RuntimeError if it captures already).
  void begin_capture();
  // Ends the capture (RuntimeError if there is none) and returns what it recorded.
  std::shared_ptr<const Recording> end_capture();
  bool capturing() const { return capturing_.load(std::memory_order_acquire); }
  // Queues the recorded work as one task: each item runs in order; the first
  // error any raised fails the stream, as it would have run item by item.
  void enqueue_recorded(std::shared_ptr<const Recording> recording);
  // True when everything queued so far has finished.
  bool query() const { return completed_.load(std::memory_order_acquire) == submitted_.load(std::memory_order_acquire); }
  // Blocks until everything queued so far has finished; rethrows the first
  // error a task raised since the last synchronize.
  void synchronize();
  // Blocks until everything queued so far has finished, leaving an error for synchronize().
  void wait_idle();
  // True when a task raised an error that synchronize() has not reported yet.
  bool has_error() const { return has_error_.load(std::memory_order_acquire); }
  // That error, left for synchronize() (null if none).
  std::exception_ptr pending_error();
  // Forgets `error` if it is still the pending one, as an event recorded
  // after it reports it; false when it is not (synchronize or another event
  // reported it already).
  bool forget_error(const std::exception_ptr& error);

 private:
  void run();

  const int device_;
  const int64_t id_;
  const int priority_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<std::function<void()>> queue_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};
  bool stopping_ = false;
  std::atomic<bool> capturing_{false};
  std::unique_ptr<Recording> recording_;  // while capturing_
  std::thread worker_;  // started on first enqueue
};

}  // namespace torchplug::runtime
