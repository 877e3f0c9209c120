#pragma once
// Device-side activity for torch.profiler: kernels and copies on simulated
// devices are timed while a profiling session runs, to be handed to Kineto
// (profiler/kineto_profiler.cpp) and shown next to the CPU ops. Outside a
// session a kernel pays one relaxed atomic load.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace torchplug {

// A fallback kernel is the CPU's kernel run for an operator the device has
// none for (kernels/cpu_fallback.cpp): traces name it apart from the device's
// own kernels, so a slow step shows which operators fell back.
enum class ActivityKind { kKernel, kFallbackKernel, kMemcpy };

struct RecordedActivity {
  std::string name;
  ActivityKind kind;
  c10::Device device;
  int64_t stream;
  int64_t start_ns;  // wall clock (CLOCK_REALTIME), as the profiler's CPU events
  int64_t end_ns;
  uint64_t correlation;
};

namespace detail {
extern std::atomic<int> tracing_sessions;
}  // namespace detail

inline bool device_tracing() { return detail::tracing_sessions.load(std::memory_order_relaxed) > 0; }

int64_t activity_clock_ns();
void record_activity(RecordedActivity activity);

// Session control, for the Kineto side.
void start_device_tracing();
void stop_device_tracing();
std::vector<RecordedActivity> take_recorded_activities();

// The correlation id the profiler gave the operator the calling thread runs (0 if none).
uint64_t current_correlation_id();
void push_correlation_id(uint64_t id);
void pop_correlation_id();

// Times the enclosing scope as one activity on `device`'s current stream.
class DeviceActivity {
 public:
  DeviceActivity(const char* name, c10::Device device, ActivityKind kind = ActivityKind::kKernel)
      : name_(name != nullptr && device_tracing() ? name : nullptr),
        kind_(kind),
        device_(device),
        start_ns_(name_ != nullptr ? activity_clock_ns() : 0) {}
  // The same for a kernel a stream worker runs: on `stream`, for the
  // operator the profiler correlated with its launch; recorded only when it
  // was launched during a session too (a kernel launched before the session
  // began is not part of it, though it runs during it).
  DeviceActivity(const char* name, c10::Device device, ActivityKind kind, c10::StreamId stream, uint64_t correlation,
                 bool launched_while_tracing)
      : DeviceActivity(launched_while_tracing ? name : nullptr, device, kind) {
    stream_ = stream;
    correlation_ = correlation;
  }
  ~DeviceActivity() {
    if (name_ != nullptr) {
      finish();
    }
  }
  DeviceActivity(const DeviceActivity&) = delete;
  DeviceActivity& operator=(const DeviceActivity&) = delete;

 private:
  void finish() noexcept;

  const char* name_;
  ActivityKind kind_;
  c10::Device device_;
  int64_t start_ns_;
  std::optional<c10::StreamId> stream_;
  std::optional<uint64_t> correlation_;
};

}  // namespace torchplug
