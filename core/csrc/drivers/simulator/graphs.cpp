// Graph capture: a stream records the work queued on it instead of running
// it (runtime::Stream::begin_capture), and a graph queues the recording again.
#include <memory>
#include <utility>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"
#include "runtime/errors.h"

namespace torchplug::simulator {

void graphs::begin_capture(TPD_Graph_BeginCapture_Args& args) {
  auto stream = find_client(args.client)->stream(args.stream);
  try {
    stream->begin_capture();
  } catch (const runtime::RuntimeError& error) {
    throw Error(TPD_INVALID_ARGUMENT, error.what());
  }
}

void graphs::end_capture(TPD_Graph_EndCapture_Args& args) {
  auto client = find_client(args.client);
  std::shared_ptr<const runtime::Stream::Recording> recording;
  try {
    recording = client->stream(args.stream)->end_capture();
  } catch (const runtime::RuntimeError& error) {
    throw Error(TPD_INVALID_ARGUMENT, error.what());
  }
  args.work_count = recording->size();
  args.graph = client->add_graph(std::move(recording));
}

void graphs::graph_launch(TPD_Graph_Launch_Args& args) {
  auto client = find_client(args.client);
  auto recording = client->graph(args.graph);  // looked up first: a bad graph is reported before a bad stream
  auto stream = client->stream(args.stream);
  if (stream->capturing()) {
    throw Error(TPD_INVALID_ARGUMENT, "graph_launch on a stream that is capturing a graph: launching a graph "
                                      "inside a capture is not supported; launch it outside the capture.");
  }
  stream->enqueue_recorded(std::move(recording));
}

void graphs::graph_destroy(TPD_Graph_Destroy_Args& args) { find_client(args.client)->remove_graph(args.graph); }

}  // namespace torchplug::simulator
