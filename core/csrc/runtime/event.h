#pragma once
// Events mark a point in a stream's work: they complete when the stream gets
// there, carry the time it did, and let another stream or the host wait.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>

namespace torchplug::runtime {

class Stream;

class Event {
 public:
  explicit Event(bool enable_timing = false) : enable_timing_(enable_timing) {}

  // Captures all work queued on `stream` so far; recording again replaces the mark.
  void record(Stream& stream);
  bool recorded() const;
  // True when the captured work has finished (or the event was never recorded).
  bool query() const;
  // Waits for the captured work; rethrows the error a task of the stream
  // raised before the mark, unless the stream's synchronize or another event
  // reported it already: an error is reported once.
  void synchronize() const;
  // Makes work queued later on `stream` wait for this event.
  void block(Stream& stream) const;
  // Milliseconds from this event to `end`; both must be recorded with timing.
  double elapsed_ms(const Event& end) const;
  // When the captured work finished (a profiler's timestamp); empty while it
  // runs or when the event was never recorded.
  std::optional<std::chrono::steady_clock::time_point> completion_time() const;
  bool timing_enabled() const { return enable_timing_; }
  int device() const;

 private:
  struct Mark {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::chrono::steady_clock::time_point time;
    // A platform's streams live for the process; whoever owns a stream of
    // its own (the simulator driver) keeps it while an event's mark points to it.
    Stream* stream = nullptr;
    std::exception_ptr error;  // a task of `stream` failed before the mark
    void complete(std::exception_ptr failure = nullptr);
    void wait();
  };
  std::shared_ptr<Mark> current() const;

  const bool enable_timing_;
  mutable std::mutex mutex_;
  std::shared_ptr<Mark> mark_;
  int device_ = -1;
};

}  // namespace torchplug::runtime
