// Streams and host functions.
#include <cstddef>
#include <memory>
#include <string>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"

namespace torchplug::simulator {
namespace {

// Room for a host function's failure message, with its NUL.
constexpr size_t kHostFunctionMessageSize = 4096;

// Refuses to wait for `stream` from a host function running on it (`what`
// names the call), which would wait for itself forever.
void check_not_inside(const runtime::Stream& stream, const char* what) {
  if (host_function_stream == &stream) {
    throw Error(TPD_INVALID_ARGUMENT, std::string(what) +
                                          " was called from a host function running on that stream, and would wait "
                                          "for the function itself forever; call it from another thread.");
  }
}

}  // namespace

void check_not_capturing(const runtime::Stream& stream, const char* what) {
  if (stream.capturing()) {
    throw Error(TPD_INVALID_ARGUMENT, std::string(what) +
                                          " on a stream that is capturing a graph: the stream runs nothing until "
                                          "the capture ends; end the capture first.");
  }
}

namespace {

// Marks the thread as running a host function of `stream` (see host_function_stream).
class HostFunctionScope {
 public:
  explicit HostFunctionScope(const runtime::Stream& stream) { host_function_stream = &stream; }
  ~HostFunctionScope() { host_function_stream = nullptr; }
  HostFunctionScope(const HostFunctionScope&) = delete;
  HostFunctionScope& operator=(const HostFunctionScope&) = delete;
};

// Runs a host function in its stream's order: fails, as a faulting kernel on
// the device would, when a kernel failure was injected for the device; and
// turns a non-zero return into the stream's failure with the message written.
void run_host_function(runtime::Platform& platform, const runtime::Stream& stream, TPD_HostFunction function,
                       void* user_data) {
  if (platform.take_kernel_failure(stream.device())) {
    throw Error(TPD_EXECUTION_FAILED, "A host function failed on " + platform.name() + ":" +
                                          std::to_string(stream.device()) +
                                          ": injected kernel failure (the simulator extension's inject_fault "
                                          "with TPD_SIMULATOR_FAIL_KERNELS); it did not run.");
  }
  char message[kHostFunctionMessageSize] = {};
  int status = 0;
  {
    const HostFunctionScope scope(stream);
    status = function(user_data, message, sizeof message);
  }
  if (status != 0) {
    message[sizeof message - 1] = '\0';  // in case the function filled the buffer without one
    if (message[0] == '\0') {
      throw Error(TPD_EXECUTION_FAILED,
                  "A host function returned " + std::to_string(status) + " without writing a failure message.");
    }
    throw Error(TPD_EXECUTION_FAILED, message);
  }
}

}  // namespace

void stream_create(TPD_Stream_Create_Args& args) {
  auto client = find_client(args.client, args.device);
  if (args.priority < kStreamPriorityGreatest || args.priority > 0) {
    throw Error(TPD_INVALID_ARGUMENT, "Stream priority " + std::to_string(args.priority) +
                                          " is outside the device's range; pass one from " +
                                          std::to_string(kStreamPriorityGreatest) +
                                          " (the most urgent) to 0 (the default).");
  }
  std::shared_ptr<runtime::Stream> stream = client->platform().create_stream(args.device, args.priority);
  args.stream = client->add_stream(std::move(stream));
}

void stream_destroy(TPD_Stream_Destroy_Args& args) {
  auto client = find_client(args.client);
  check_not_inside(*client->stream(args.stream), "stream_destroy");
  // An event recorded on the stream may keep the object: its work is waited for here.
  client->remove_stream(args.stream)->wait_idle();
}

void stream_query(TPD_Stream_Query_Args& args) {
  auto stream = find_client(args.client)->stream(args.stream);
  args.idle = stream->query() ? 1 : 0;
  args.failed = stream->has_error() ? 1 : 0;
}

void stream_wait_idle(TPD_Stream_Query_Args& args) {
  auto stream = find_client(args.client)->stream(args.stream);
  check_not_inside(*stream, "stream_wait_idle");
  check_not_capturing(*stream, "stream_wait_idle");
  stream->wait_idle();
  args.idle = 1;
  args.failed = stream->has_error() ? 1 : 0;
}

void stream_synchronize(TPD_Stream_Query_Args& args) {
  auto stream = find_client(args.client)->stream(args.stream);
  check_not_inside(*stream, "stream_synchronize");
  check_not_capturing(*stream, "stream_synchronize");
  wait_for_work([&] { stream->synchronize(); });
}

void stream_wait_event(TPD_Stream_WaitEvent_Args& args) {
  auto client = find_client(args.client);
  auto stream = client->stream(args.stream);
  auto event = client->event(args.event);
  check_not_capturing(*stream, "stream_wait_event (events in a capture are not supported)");
  event->event().block(*stream);
}

void stream_launch_host_function(TPD_Stream_LaunchHostFunction_Args& args) {
  auto client = find_client(args.client);
  auto stream = client->stream(args.stream);
  if (args.function == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT,
                "TPD_Stream_LaunchHostFunction_Args.function is NULL; pass the function to run.");
  }
  // The platform lives for the process; the stream runs the task, so it outlives it.
  stream->enqueue([&platform = client->platform(), &running_on = *stream, function = args.function,
                   user_data = args.user_data] { run_host_function(platform, running_on, function, user_data); });
}

}  // namespace torchplug::simulator
