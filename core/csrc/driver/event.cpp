#include "driver/event.h"

#include <string>
#include <thread>

#include "driver/call_args.h"
#include "driver/device_runtime.h"
#include "driver/driver_library.h"
#include "driver/stream.h"

namespace torchplug::driver {

Event::~Event() {
  if (handle_ == nullptr) {
    return;
  }
  TPD_Event_Query_Args destroy = args();
  TPD_Error* error = runtime_->library().api().event_destroy(&destroy);
  if (error != nullptr) {
    try {
      runtime_->library().raise(error);
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor; the driver (e.g. in a forked child) keeps it
    }
  }
}

TPD_Event_Query_Args Event::args() const {
  auto result = client_args<TPD_Event_Query_Args>(TPD_Event_Query_Args_STRUCT_SIZE,
                                                  runtime_ != nullptr ? runtime_->client() : nullptr);
  result.event = handle_;
  return result;
}

void Event::record(DeviceRuntime& runtime, const Stream& stream) {
  if (handle_ != nullptr && (runtime_ != &runtime || device_ != stream.device())) {
    TPD_Event_Query_Args destroy = args();
    runtime_->library().check(runtime_->library().api().event_destroy(&destroy));
    handle_ = nullptr;
  }
  const TPD_Api& api = runtime.library().api();
  if (handle_ == nullptr) {
    auto create = client_args<TPD_Event_Create_Args>(TPD_Event_Create_Args_STRUCT_SIZE, runtime.client());
    create.device = stream.device();
    create.enable_timing = timing_ ? 1 : 0;
    runtime.library().check(api.event_create(&create));
    runtime_ = &runtime;
    handle_ = create.event;
    device_ = stream.device();
  }
  auto record = client_args<TPD_Event_Record_Args>(TPD_Event_Record_Args_STRUCT_SIZE, runtime.client());
  record.event = handle_;
  record.stream = stream.handle();
  runtime.library().check(api.event_record(&record));
}

bool Event::query() const {
  if (handle_ == nullptr) {
    return true;
  }
  TPD_Event_Query_Args query = args();
  runtime_->library().check(runtime_->library().api().event_query(&query));
  return query.completed != 0;
}

void Event::synchronize() const {
  if (handle_ == nullptr) {
    return;
  }
  TPD_Event_Query_Args wait = args();
  runtime_->library().check(runtime_->library().api().event_synchronize(&wait));
}

void Event::block(const Stream& stream) const {
  if (handle_ == nullptr) {
    return;
  }
  auto wait = stream_args<TPD_Stream_WaitEvent_Args>(TPD_Stream_WaitEvent_Args_STRUCT_SIZE, runtime_->client(),
                                                     stream.handle());
  wait.event = handle_;
  stream.note_issued();
  runtime_->library().check(runtime_->library().api().stream_wait_event(&wait));
}

double Event::elapsed_ms(const Event& end) const {
  if (!timing_ || !end.timing_) {
    throw DriverError(TPD_UNSUPPORTED,
                      "Events were not created with timing enabled; create both with "
                      "enable_timing=True to measure elapsed time.");
  }
  if (handle_ == nullptr || end.handle_ == nullptr) {
    throw DriverError(TPD_NOT_READY, "Both events must be recorded before measuring elapsed time.");
  }
  if (runtime_ != end.runtime_ || device_ != end.device_) {
    // Each device has its own clock, as CUDA's do: a difference between them means nothing.
    throw DriverError(TPD_INVALID_ARGUMENT,
                      "elapsed_time() needs two events recorded on the same device, but they were "
                      "recorded on devices " + std::to_string(device_) + " and " + std::to_string(end.device_) +
                          "; record both on streams of one device.");
  }
  // Waits as the host does for a result, without reporting a failure of the streams.
  while (!query() || !end.query()) {
    std::this_thread::yield();
  }
  auto elapsed = client_args<TPD_Event_ElapsedTime_Args>(TPD_Event_ElapsedTime_Args_STRUCT_SIZE, runtime_->client());
  elapsed.start = handle_;
  elapsed.end = end.handle_;
  runtime_->library().check(runtime_->library().api().event_elapsed_time(&elapsed));
  return elapsed.milliseconds;
}

int64_t Event::completion_ns() const {
  const TPD_ProfilerExtension* profiler = runtime_ != nullptr ? runtime_->library().profiler() : nullptr;
  if (profiler == nullptr || handle_ == nullptr || !timing_ || !query()) {
    return -1;
  }
  auto stamp = client_args<TPD_Profiler_EventTimestamp_Args>(TPD_Profiler_EventTimestamp_Args_STRUCT_SIZE,
                                                              runtime_->client());
  stamp.event = handle_;
  runtime_->library().check(profiler->event_timestamp(&stamp));
  return stamp.nanoseconds;
}

}  // namespace torchplug::driver
