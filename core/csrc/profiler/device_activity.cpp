#include "profiler/device_activity.h"

#include <mutex>

#include <c10/util/ApproximateClock.h>

#include "backend/backend.h"

namespace torchplug {
namespace detail {
std::atomic<int> tracing_sessions{0};
}  // namespace detail

namespace {

std::mutex recorded_mutex;
std::vector<RecordedActivity> recorded;
thread_local std::vector<uint64_t> correlation_stack;

}  // namespace

int64_t activity_clock_ns() { return c10::getTime(); }

void record_activity(RecordedActivity activity) {
  std::lock_guard<std::mutex> lock(recorded_mutex);
  recorded.push_back(std::move(activity));
}

void start_device_tracing() {
  std::lock_guard<std::mutex> lock(recorded_mutex);
  if (detail::tracing_sessions.fetch_add(1) == 0) {
    recorded.clear();
  }
}

void stop_device_tracing() { detail::tracing_sessions.fetch_sub(1); }

std::vector<RecordedActivity> take_recorded_activities() {
  std::lock_guard<std::mutex> lock(recorded_mutex);
  return std::exchange(recorded, {});
}

uint64_t current_correlation_id() { return correlation_stack.empty() ? 0 : correlation_stack.back(); }

void push_correlation_id(uint64_t id) { correlation_stack.push_back(id); }

void pop_correlation_id() {
  if (!correlation_stack.empty()) {
    correlation_stack.pop_back();
  }
}

void DeviceActivity::finish() noexcept {
  try {
    // Kernels are named after their operator, suffixed so that profiler tables,
    // which group events by name, keep them apart from the CPU-side op.
    std::string name = kind_ == ActivityKind::kKernel           ? std::string(name_) + " kernel"
                       : kind_ == ActivityKind::kFallbackKernel ? std::string(name_) + " (CPU fallback)"
                                                                : std::string(name_);
    record_activity({std::move(name), kind_, device_, stream_.value_or(current_stream(device_).id()), start_ns_,
                     activity_clock_ns(), correlation_.value_or(current_correlation_id())});
  } catch (...) {
    // A failed trace record must not turn a successful kernel into an error.
  }
}

}  // namespace torchplug
