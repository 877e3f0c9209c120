#pragma once
// A device stream as the torch layer uses it: a driver stream with the c10
// stream id the core gave it. Each call is one call through the driver's
// table; work the core queues itself (a kernel run on the host, in stream
// order) is a heap closure run as a TPD host function.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "torchplug/driver.h"

namespace torchplug::driver {

class DriverLibrary;

class Stream {
 public:
  Stream(const DriverLibrary& library, TPD_Client* client, TPD_Stream* handle, int device, int64_t id, int priority);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  int64_t id() const { return id_; }
  int priority() const { return priority_; }
  TPD_Stream* handle() const { return handle_; }

  // True when everything queued so far has finished. When nothing was queued
  // since the driver last answered idle, two atomic loads answer it (the
  // per-launch check); otherwise one driver call.
  bool query() const {
    const uint64_t issued = issued_.load(std::memory_order_acquire);
    return idle_through_.load(std::memory_order_acquire) == issued || query_driver(issued);
  }
  // True when queued work failed and no synchronize (or event) reported it yet.
  bool has_error() const { return call(api_.stream_query).failed != 0; }
  // Blocks until everything queued so far has finished; throws the first
  // failure since the last report (DriverError, TPD_EXECUTION_FAILED, with
  // the failed work's message), once.
  void synchronize() const;
  // Blocks until everything queued so far has finished, leaving a failure for synchronize().
  void wait_idle() const;
  // Queues `task`; an exception it throws fails the stream with its what().
  void enqueue(std::function<void()> task) const;
  // Queues the driver host function `function(user_data, ...)` itself, for a
  // caller whose `function` releases what `user_data` owns: one allocation
  // per launch where enqueue wraps a closure twice. Not while capturing (a
  // graph re-runs its work: enqueue keeps it); false then, nothing queued.
  bool launch_host_function(TPD_HostFunction function, void* user_data) const;
  void copy_async(void* destination, const void* source, size_t bytes, TPD_CopyKind kind) const;
  void memset_async(void* pointer, int value, size_t bytes) const;
  // Queues `function` of a loaded kernel module with its arguments (the kernel-modules extension).
  void launch_kernel(TPD_Function* function, const TPD_KernelArg* args, size_t count) const;
  // Graph capture (the driver's graph-capture extension; DriverError
  // TPD_UNSUPPORTED without it). Between begin_capture and end_capture the
  // driver records the stream's work instead of running it; the closures
  // enqueue records are kept in `kept` (the graph's), re-runnable, for as
  // long as the graph lives. Capture and its end are on the capturing thread.
  using KeptClosures = std::vector<std::unique_ptr<std::function<void()>>>;
  void begin_capture(KeptClosures& kept) const;
  // The recorded graph (TPD_Graph of this stream's client) and its number of work items.
  TPD_Graph* end_capture(size_t& work_count) const;
  bool capturing() const { return capture_.load(std::memory_order_acquire) != nullptr; }
  // Queues the work `graph` recorded on this stream.
  void launch_graph(TPD_Graph* graph) const;
  void destroy_graph(TPD_Graph* graph) const;

  // Counts work queued on the stream through the driver by other means than
  // the calls above (an event wait, a simulator sleep), for query().
  void note_issued() const { issued_.fetch_add(1, std::memory_order_acq_rel); }
  // How much work the core has queued on the stream so far: the next work
  // queued is issued() + 1 in the stream's order, or later.
  uint64_t issued() const { return issued_.load(std::memory_order_acquire); }

 private:
  // Calls `function` of the table (stream_query, stream_synchronize or
  // stream_wait_idle) on this stream; throws the driver's error.
  TPD_Stream_Query_Args call(TPD_Error* (*function)(TPD_Stream_Query_Args*)) const;
  const TPD_GraphCaptureExtension& graph_extension() const;
  bool query_driver(uint64_t issued) const;
  // Records that the work issued up to `issued` has finished.
  void finished_through(uint64_t issued) const;

  const DriverLibrary& library_;
  const TPD_Api& api_;
  TPD_Client* const client_;
  TPD_Stream* const handle_;
  const int device_;
  const int64_t id_;
  const int priority_;
  // Work the core queued on the stream, and how much of it the driver last
  // reported finished (the stream idle): equal means idle without asking.
  mutable std::atomic<uint64_t> issued_{0};
  mutable std::atomic<uint64_t> idle_through_{0};
  mutable std::atomic<KeptClosures*> capture_{nullptr};  // while capturing
};

}  // namespace torchplug::driver
