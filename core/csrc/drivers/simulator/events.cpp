// Events: marks in a stream's work that other streams and the host wait for.
#include <memory>
#include <utility>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"

namespace torchplug::simulator {

void event_create(TPD_Event_Create_Args& args) {
  auto client = find_client(args.client, args.device);
  args.event = client->add_event(std::make_shared<EventHandle>(args.device, args.enable_timing != 0));
}

void event_destroy(TPD_Event_Query_Args& args) {
  // Work queued to complete or wait for it holds its mark, so it is not waited for.
  find_client(args.client)->remove_event(args.event);
}

void event_record(TPD_Event_Record_Args& args) {
  auto client = find_client(args.client);
  auto event = client->event(args.event);  // looked up first: a bad event is reported before a bad stream
  auto stream = client->stream(args.stream);
  check_not_capturing(*stream, "event_record (events in a capture are not supported)");
  event->record(std::move(stream));
}

void event_query(TPD_Event_Query_Args& args) {
  args.completed = find_client(args.client)->event(args.event)->event().query() ? 1 : 0;
}

void event_synchronize(TPD_Event_Query_Args& args) {
  auto event = find_client(args.client)->event(args.event);
  wait_for_work([&] { event->event().synchronize(); });
}

void event_elapsed_time(TPD_Event_ElapsedTime_Args& args) {
  auto client = find_client(args.client);
  auto start = client->event(args.start);
  args.milliseconds = client->event(args.end)->milliseconds_since(*start);
}

}  // namespace torchplug::simulator
