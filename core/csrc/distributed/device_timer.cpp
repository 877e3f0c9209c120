// DDP's timer for the simulated devices. DistributedDataParallel times each
// sampled iteration's forward, backward compute and backward communication
// with a timer registered for the parameters' device type; CUDA's records
// events on the current stream. Without one, DDP warns on every rank and its
// logging data has no device times.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace torchplug::distributed {
namespace {

constexpr double kNanosecondsPerMillisecond = 1e6;
constexpr size_t kTimedEvents = 5;  // c10d::Timer::Event's values

class DeviceTimer final : public c10d::Timer {
 public:
  explicit DeviceTimer(c10::Device device)
      : device_(device),
        events_{timing_event(), timing_event(), timing_event(), timing_event(), timing_event()} {}

  void record(Event event) override {
    // The host timestamp tells measureDifference which events this iteration recorded.
    c10d::Timer::record(event);
    const c10::impl::VirtualGuardImpl guard(device_.type());
    event_for(event).record(guard.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    if (!getTimestamp(start).has_value() || !getTimestamp(end).has_value()) {
      return std::nullopt;
    }
    const c10::Event& start_event = event_for(start);
    const c10::Event& end_event = event_for(end);
    // The two events may sit on different streams: wait for both.
    start_event.synchronize();
    end_event.synchronize();
    const double milliseconds = start_event.elapsedTime(end_event);
    // Communication can end before the backward compute it overlaps: no figure then, as on CUDA.
    if (milliseconds < 0) {
      return std::nullopt;
    }
    return static_cast<int64_t>(milliseconds * kNanosecondsPerMillisecond);
  }

 private:
  c10::Event timing_event() const { return c10::Event(device_.type(), c10::EventFlag::BACKEND_DEFAULT); }

  c10::Event& event_for(Event event) { return events_[static_cast<size_t>(event)]; }

  const c10::Device device_;
  std::array<c10::Event, kTimedEvents> events_;
};

}  // namespace
}  // namespace torchplug::distributed

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torchplug::distributed::DeviceTimer);
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kHPU, torchplug::distributed::DeviceTimer);
}  // namespace c10d
