// The PrivateUse1 profiler stubs: what the legacy profiler
// (torch.autograd.profiler.profile(use_device=..., use_kineto=False)) calls to
// time operators on the device with events recorded on the current stream.
#include "profiler/profiler_stubs.h"

#include <memory>

#include <c10/core/DeviceType.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "backend/backend.h"
#include "driver/event.h"

namespace torchplug {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

struct Stubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    driver::DeviceRuntime& runtime = device_runtime(kType);
    const auto index = static_cast<c10::DeviceIndex>(runtime.current_device());
    if (device != nullptr) {
      *device = index;
    }
    auto marker = std::make_shared<driver::Event>(/*enable_timing=*/true);
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    const driver::Stream& stream = runtime_stream(current_stream(c10::Device(kType, index)));
    translate_runtime_errors([&] { marker->record(runtime, stream); });
    *event = std::move(marker);
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    const auto& first = *std::static_pointer_cast<driver::Event>(*start);
    const auto& second = *std::static_pointer_cast<driver::Event>(*end);
    return translate_runtime_errors([&] {
      first.synchronize();
      second.synchronize();
      // The profiler reports microseconds.
      return static_cast<float>(first.elapsed_ms(second) * 1000.0);
    });
  }

  // Simulated devices have no external range annotator to forward marks to.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const int count = device_runtime(kType).device_count();
    for (int index = 0; index < count; ++index) {
      op(index);
    }
  }

  void synchronize() const override {
    driver::DeviceRuntime& runtime = device_runtime(kType);
    translate_runtime_errors([&] {
      for (int index = 0; index < runtime.device_count(); ++index) {
        runtime.synchronize(index);
      }
    });
  }
};

}  // namespace

void register_privateuse1_profiler_stubs() {
  static Stubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
}

}  // namespace torchplug
