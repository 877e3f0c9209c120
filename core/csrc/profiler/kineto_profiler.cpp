// The Kineto activity profiler of the simulated devices: a profiling session
// switches device activity recording on, and at the end turns the recorded
// kernels and copies into Kineto activities linked to the CPU ops that
// launched them.
#include "profiler/kineto_profiler.h"

#include <deque>
#include <memory>
#include <set>
#include <string>

#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include "profiler/device_activity.h"

namespace torchplug {
namespace {

libkineto::ActivityType kineto_type(ActivityKind kind) {
  return kind == ActivityKind::kMemcpy ? libkineto::ActivityType::GPU_MEMCPY
                                       : libkineto::ActivityType::CONCURRENT_KERNEL;
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    start_device_tracing();
    span_.startTime = activity_clock_ns();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    stop_device_tracing();
    span_.endTime = activity_clock_ns();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback launched_by,
                    int64_t /*window_start*/, int64_t /*window_end*/) override {
    for (RecordedActivity& recorded : take_recorded_activities()) {
      // torch attributes kernel and copy activities to the PrivateUse1 device;
      // work on other simulated devices (hpu) would be miscounted as its time.
      if (recorded.device.type() != c10::DeviceType::PrivateUse1) {
        continue;
      }
      auto activity = std::make_unique<libkineto::GenericTraceActivity>(span_, kineto_type(recorded.kind),
                                                                        std::move(recorded.name));
      activity->startTime = recorded.start_ns;
      activity->endTime = recorded.end_ns;
      activity->device = recorded.device.index();
      activity->resource = recorded.stream;
      activity->id = static_cast<int32_t>(recorded.correlation);
      // Typed values: the formatting templates would need fmt, which torch does not export.
      activity->addTypedMetadata("device", recorded.device.str());
      activity->addTypedMetadata("stream", recorded.stream);
      activity->addTypedMetadata("correlation", recorded.correlation);
      if (recorded.kind == ActivityKind::kFallbackKernel) {
        // For tools that read the trace's fields rather than the names.
        activity->addTypedMetadata("cpu_fallback", true);
      }
      if (recorded.correlation != 0) {
        activity->linked = launched_by(static_cast<int32_t>(recorded.correlation));
        activity->flow.id = static_cast<uint32_t>(recorded.correlation);
        activity->flow.type = libkineto::kLinkAsyncCpuGpu;
        activity->flow.start = false;
      }
      activity->log(logger);
      // The logger may keep pointers to the activities: they live as long as the session.
      activities_.push_back(std::move(activity));
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override { push_correlation_id(id); }
  void popCorrelationId() override { pop_correlation_id(); }

 private:
  libkineto::TraceSpan span_{0, 0, "torchplug"};
  std::deque<std::unique_ptr<libkineto::GenericTraceActivity>> activities_;
};

class ActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }

  // Kineto offers every session to every plug-in; record only when device activity was asked for.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& /*config*/) override {
    for (libkineto::ActivityType type : activities_) {
      if (types.count(type) > 0) {
        return std::make_unique<Session>();
      }
    }
    return nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "torchplug";
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL,
                                                libkineto::ActivityType::GPU_MEMCPY};
};

}  // namespace

void register_privateuse1_profiler() {
  static const bool registered = [] {
    torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().registerFactory(
        [] { return std::make_unique<ActivityProfiler>(); });
    return true;
  }();
  (void)registered;
}

}  // namespace torchplug
