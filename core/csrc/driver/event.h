#pragma once
// A device event as the torch layer uses it (c10's void* events, the
// allocator's pending-work marks, the legacy profiler's markers): a driver
// event created on the device of the stream it is first recorded on.
#include "torchplug/driver.h"

namespace torchplug::driver {

class DeviceRuntime;
class Stream;

class Event {
 public:
  explicit Event(bool enable_timing = false) : timing_(enable_timing) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Captures the work queued on `stream` (of `runtime`) so far; recording
  // again moves the mark, to another device too.
  void record(DeviceRuntime& runtime, const Stream& stream);
  bool recorded() const { return handle_ != nullptr; }
  int device() const { return device_; }
  bool timing_enabled() const { return timing_; }
  // True when the captured work finished (or the event was never recorded).
  bool query() const;
  // Waits for the captured work; throws a failure of its stream before the
  // mark unless reported already (DriverError).
  void synchronize() const;
  // Makes work queued later on `stream` wait for this event.
  void block(const Stream& stream) const;
  // Milliseconds from this event to `end`: both recorded with timing on one
  // device; waits for both (without reporting failures).
  double elapsed_ms(const Event& end) const;
  // The driver's timestamp of the completed mark (profiler extension), or -1.
  int64_t completion_ns() const;

 private:
  TPD_Event_Query_Args args() const;

  const bool timing_;
  DeviceRuntime* runtime_ = nullptr;
  TPD_Event* handle_ = nullptr;
  int device_ = -1;
};

}  // namespace torchplug::driver
