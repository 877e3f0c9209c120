#pragma once
// What a stream sanitizer must see besides the operators themselves: where a
// program orders streams (event records and waits, synchronizations) and
// where device memory changes hands (frees, record_stream). Entries queue up
// here, without Python or a lock on the hot path while nobody listens, and
// the sanitizer drains them before it looks at each operator, so it sees them
// in program order and no hook ever needs the GIL (frees run on any thread).
#include <cstdint>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace torchplug {

enum class TraceKind {
  kEventRecord,        // `handle` (an event) marks the work queued on `stream` so far
  kEventWait,          // later work on `stream` waits for event `handle`
  kEventSynchronize,   // the host waited for event `handle`
  kEventDestroy,       // event `handle` is gone; its address may be reused
  kStreamSynchronize,  // the host waited for all work on `stream`
  kDeviceSynchronize,  // the host waited for all work on `device`
  kMemoryFree,         // the allocation at `handle` (made on `stream`) was freed
  kMemoryRecordStream, // the allocation at `handle` is in use on `stream` (record_stream)
  kGraphCaptureBegin,  // `stream` records its work into graph `handle` instead of running it
  kGraphCaptureEnd,    // `stream` runs its work again; graph `handle` holds what it recorded
  kGraphReplay,        // graph `handle`'s recorded work is queued on `stream`
  kGraphReset,         // graph `handle` is gone; its address may be reused
};

struct TraceEntry {
  TraceKind kind;
  c10::Device device;
  c10::StreamId stream = 0;
  uintptr_t handle = 0;
};

// Whether entries are being collected (a sanitizer is on).
bool stream_trace_enabled();
void set_stream_trace_enabled(bool enabled);
// Queues `entry` when tracing is on.
void trace_stream_order(const TraceEntry& entry);
// Hands over what was queued since the last call, oldest first.
std::vector<TraceEntry> take_stream_trace();

}  // namespace torchplug
