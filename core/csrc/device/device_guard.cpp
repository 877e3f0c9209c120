#include "device/device_guard.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "backend/backend.h"
#include "memory/device_allocator.h"
#include "launch/stream_trace.h"
#include "driver/event.h"

namespace torchplug {
namespace {

class SimulatedDeviceGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  explicit SimulatedDeviceGuard(c10::DeviceType type) : type_(type) {}

  c10::DeviceType type() const override { return type_; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device previous = getDevice();
    if (device.index() != previous.index()) {
      setDevice(device);
    }
    return previous;
  }

  c10::Device getDevice() const override {
    return c10::Device(type_, static_cast<c10::DeviceIndex>(runtime().current_device()));
  }

  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == type_, "Expected a ", c10::DeviceTypeName(type_, true), " device, got ", device);
    const c10::DeviceIndex index = checked_device_index(type_, device.index());
    translate_runtime_errors([&] { runtime().set_current_device(index); });
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    try {
      runtime().set_current_device(device.index());
    } catch (...) {
      // Restoring a device that was valid when saved; nothing sensible to report from noexcept.
    }
  }

  c10::Stream getStream(c10::Device device) const override { return current_stream(device); }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(type_, checked_device_index(type_, device.index())));
  }

  c10::Stream getNewStream(c10::Device device, int priority) const override {
    // torch.Stream(device=...) passes index -1 for "the current device".
    const c10::DeviceIndex index = checked_device_index(type_, device.index());
    driver::Stream& stream =
        translate_runtime_errors([&]() -> driver::Stream& { return runtime().pool_stream(index, priority); });
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(type_, index), stream.id());
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool is_high_priority) const override {
    return getNewStream(device, is_high_priority ? -1 : 0);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    const c10::Stream previous = current_stream(stream.device());
    set_current_stream(stream);
    return previous;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    driver::DeviceRuntime* runtime = find_device_runtime(type_);
    return runtime == nullptr ? 0 : static_cast<c10::DeviceIndex>(runtime->device_count());
  }

  // Kernels run on the host, so every dtype the CPU handles is supported.
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    checked_device_index(type_, device.index());
    return c10::DeviceCapability();
  }

  bool queryStream(const c10::Stream& stream) const override {
    return translate_runtime_errors([&] { return runtime_stream(stream).query(); });
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    translate_runtime_errors([&] { runtime_stream(stream).synchronize(); });
    trace_stream_order({TraceKind::kStreamSynchronize, stream.device(), stream.id()});
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const c10::DeviceIndex index = checked_device_index(type_, device_index);
    translate_runtime_errors([&] { runtime().synchronize(index); });
    trace_stream_order({TraceKind::kDeviceSynchronize, c10::Device(type_, index)});
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match the recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      *event = new driver::Event(/*enable_timing=*/flag == c10::EventFlag::BACKEND_DEFAULT);
    }
    auto* marker = static_cast<driver::Event*>(*event);
    const driver::Stream& on = runtime_stream(stream);
    translate_runtime_errors([&] { marker->record(runtime(), on); });
    trace_stream_order({TraceKind::kEventRecord, stream.device(), stream.id(), reinterpret_cast<uintptr_t>(*event)});
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) {
      const driver::Stream& on = runtime_stream(stream);
      translate_runtime_errors([&] { static_cast<driver::Event*>(event)->block(on); });
      trace_stream_order({TraceKind::kEventWait, stream.device(), stream.id(), reinterpret_cast<uintptr_t>(event)});
    }
  }

  bool queryEvent(void* event) const override {
    return event == nullptr || translate_runtime_errors([&] { return static_cast<driver::Event*>(event)->query(); });
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) {
      translate_runtime_errors([&] { static_cast<driver::Event*>(event)->synchronize(); });
      trace_stream_order({TraceKind::kEventSynchronize, c10::Device(type_), 0, reinterpret_cast<uintptr_t>(event)});
    }
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    try {
      trace_stream_order({TraceKind::kEventDestroy, c10::Device(type_), 0, reinterpret_cast<uintptr_t>(event)});
    } catch (...) {  // NOLINT(bugprone-empty-catch): a lost trace entry must not end the process
    }
    delete static_cast<driver::Event*>(event);
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calling elapsed_time().");
    return translate_runtime_errors([&] {
      return static_cast<driver::Event*>(start)->elapsed_ms(*static_cast<driver::Event*>(end));
    });
  }

  void recordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& stream) const override {
    device_allocator(type_).recordStream(data, stream);
  }

 private:
  driver::DeviceRuntime& runtime() const { return device_runtime(type_); }

  const c10::DeviceType type_;
};

}  // namespace

void register_device_guard(c10::DeviceType type) {
  if (c10::impl::hasDeviceGuardImpl(type)) {
    return;
  }
  // Leaked on purpose: torch keeps a raw pointer for the life of the process.
  c10::impl::registerDeviceGuard(type, new SimulatedDeviceGuard(type));
}

}  // namespace torchplug
