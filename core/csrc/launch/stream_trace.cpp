#include "launch/stream_trace.h"

#include <atomic>
#include <mutex>
#include <utility>

namespace torchplug {
namespace {

std::atomic<bool> enabled{false};
std::mutex entries_mutex;
std::vector<TraceEntry> entries;

}  // namespace

bool stream_trace_enabled() { return enabled.load(std::memory_order_relaxed); }

void set_stream_trace_enabled(bool on) {
  std::lock_guard<std::mutex> lock(entries_mutex);
  enabled.store(on, std::memory_order_relaxed);
  entries.clear();
}

void trace_stream_order(const TraceEntry& entry) {
  if (!stream_trace_enabled()) {
    return;
  }
  std::lock_guard<std::mutex> lock(entries_mutex);
  entries.push_back(entry);
}

std::vector<TraceEntry> take_stream_trace() {
  std::lock_guard<std::mutex> lock(entries_mutex);
  return std::exchange(entries, {});
}

}  // namespace torchplug
