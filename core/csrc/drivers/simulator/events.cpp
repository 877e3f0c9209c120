// Events: marks in a stream's work that other streams and the host wait for.
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"

namespace torchplug::simulator {

TPD_Error* event_create(TPD_Event_Create_Args* args) {
  return guarded("event_create", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Event_Create_Args, args);
    auto client = find_client(checked.client);
    client->check_device(checked.device);
    checked.event = client->add_event(std::make_shared<EventHandle>(checked.device, checked.enable_timing != 0));
  });
}

TPD_Error* event_destroy(TPD_Event_Query_Args* args) {
  return guarded("event_destroy", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Event_Query_Args, args);
    // Work queued to complete or wait for it holds its mark, so it is not waited for.
    find_client(checked.client)->remove_event(checked.event);
  });
}

TPD_Error* event_record(TPD_Event_Record_Args* args) {
  return guarded("event_record", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Event_Record_Args, args);
    auto client = find_client(checked.client);
    auto event = client->event(checked.event);
    auto stream = client->stream(checked.stream);
    if (stream->device() != event->device()) {
      throw Error(TPD_INVALID_ARGUMENT, "The event was created for device " + std::to_string(event->device()) +
                                            " but recorded on a stream of device " +
                                            std::to_string(stream->device()) +
                                            "; create the event for the stream's device.");
    }
    event->record(std::move(stream));
  });
}

TPD_Error* event_query(TPD_Event_Query_Args* args) {
  return guarded("event_query", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Event_Query_Args, args);
    checked.completed = find_client(checked.client)->event(checked.event)->event().query() ? 1 : 0;
  });
}

TPD_Error* event_synchronize(TPD_Event_Query_Args* args) {
  return guarded("event_synchronize", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Event_Query_Args, args);
    auto event = find_client(checked.client)->event(checked.event);
    wait_for_work([&] { event->event().synchronize(); });
  });
}

TPD_Error* event_elapsed_time(TPD_Event_ElapsedTime_Args* args) {
  return guarded("event_elapsed_time", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Event_ElapsedTime_Args, args);
    auto client = find_client(checked.client);
    auto start = client->event(checked.start);
    auto end = client->event(checked.end);
    if (start->device() != end->device()) {
      // Each device has its own clock, as CUDA's do: a difference between them means nothing.
      throw Error(TPD_INVALID_ARGUMENT, "The start event is of device " + std::to_string(start->device()) +
                                            " and the end event of device " + std::to_string(end->device()) +
                                            "; measure time only between events of one device.");
    }
    const auto from = start->completion_time("start");
    const auto to = end->completion_time("end");
    checked.milliseconds = std::chrono::duration<double, std::milli>(to - from).count();
  });
}

}  // namespace torchplug::simulator
