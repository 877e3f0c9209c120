#include "driver/stream.h"

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "driver/call_args.h"
#include "driver/driver_library.h"

namespace torchplug::driver {
namespace {

// Runs a closure the core queued; its exception's message becomes the host
// function's failure message (what synchronize then reports).
int run_closure(void* user_data, char* message, size_t message_size) {
  std::unique_ptr<std::function<void()>> task(static_cast<std::function<void()>*>(user_data));
  const char* reason = nullptr;
  try {
    (*task)();
    task.reset();  // what the closure holds is released in stream order, as the work it did
    return 0;
  } catch (const std::exception& error) {
    reason = error.what();
    std::strncpy(message, reason, message_size - 1);
  } catch (...) {
    std::strncpy(message, "unknown exception in work queued on the stream", message_size - 1);
  }
  message[message_size - 1] = '\0';
  return 1;
}

// Runs a closure a graph keeps: on every launch of the graph, so it stays.
int run_kept_closure(void* user_data, char* message, size_t message_size) {
  try {
    (*static_cast<std::function<void()>*>(user_data))();
    return 0;
  } catch (const std::exception& error) {
    std::strncpy(message, error.what(), message_size - 1);
  } catch (...) {
    std::strncpy(message, "unknown exception in work a graph replayed", message_size - 1);
  }
  message[message_size - 1] = '\0';
  return 1;
}

}  // namespace

Stream::Stream(const DriverLibrary& library, TPD_Client* client, TPD_Stream* handle, int device, int64_t id,
               int priority)
    : library_(library), api_(library.api()), client_(client), handle_(handle), device_(device), id_(id),
      priority_(priority) {}

TPD_Stream_Query_Args Stream::call(TPD_Error* (*function)(TPD_Stream_Query_Args*)) const {
  auto args = stream_args<TPD_Stream_Query_Args>(TPD_Stream_Query_Args_STRUCT_SIZE, client_, handle_);
  library_.check(function(&args));
  return args;
}

void Stream::finished_through(uint64_t issued) const {
  uint64_t seen = idle_through_.load(std::memory_order_acquire);
  while (seen < issued && !idle_through_.compare_exchange_weak(seen, issued, std::memory_order_acq_rel)) {
  }
}

bool Stream::query_driver(uint64_t issued) const {
  if (call(api_.stream_query).idle == 0) {
    return false;
  }
  finished_through(issued);  // everything issued before the driver's answer has finished
  return true;
}

void Stream::synchronize() const {
  const uint64_t issued = issued_.load(std::memory_order_acquire);
  call(api_.stream_synchronize);
  finished_through(issued);
}

void Stream::wait_idle() const {
  const uint64_t issued = issued_.load(std::memory_order_acquire);
  call(api_.stream_wait_idle);
  finished_through(issued);
}

void Stream::enqueue(std::function<void()> task) const {
  auto args = stream_args<TPD_Stream_LaunchHostFunction_Args>(TPD_Stream_LaunchHostFunction_Args_STRUCT_SIZE,
                                                              client_, handle_);
  if (KeptClosures* kept = capture_.load(std::memory_order_acquire)) {
    kept->push_back(std::make_unique<std::function<void()>>(std::move(task)));
    args.function = &run_kept_closure;
    args.user_data = kept->back().get();
    library_.check(api_.stream_launch_host_function(&args));
    return;
  }
  auto* closure = new std::function<void()>(std::move(task));
  args.function = &run_closure;
  args.user_data = closure;
  note_issued();
  TPD_Error* error = api_.stream_launch_host_function(&args);
  if (error != nullptr) {
    delete closure;  // not queued: the driver never runs it
    library_.raise(error);
  }
}

bool Stream::launch_host_function(TPD_HostFunction function, void* user_data) const {
  if (capturing()) {
    return false;
  }
  auto args = stream_args<TPD_Stream_LaunchHostFunction_Args>(TPD_Stream_LaunchHostFunction_Args_STRUCT_SIZE,
                                                              client_, handle_);
  args.function = function;
  args.user_data = user_data;
  note_issued();
  library_.check(api_.stream_launch_host_function(&args));
  return true;
}

const TPD_GraphCaptureExtension& Stream::graph_extension() const {
  const TPD_GraphCaptureExtension* extension = library_.graph_capture();
  if (extension == nullptr) {
    throw DriverError(TPD_UNSUPPORTED, std::string("The driver '") + library_.name() +
                                           "' offers no graph capture (the graph-capture extension of the "
                                           "driver interface); graphs cannot be captured on its devices.");
  }
  return *extension;
}

void Stream::begin_capture(KeptClosures& kept) const {
  auto args = stream_args<TPD_Graph_BeginCapture_Args>(TPD_Graph_BeginCapture_Args_STRUCT_SIZE, client_, handle_);
  library_.check(graph_extension().begin_capture(&args));
  capture_.store(&kept, std::memory_order_release);
}

TPD_Graph* Stream::end_capture(size_t& work_count) const {
  auto args = stream_args<TPD_Graph_EndCapture_Args>(TPD_Graph_EndCapture_Args_STRUCT_SIZE, client_, handle_);
  capture_.store(nullptr, std::memory_order_release);
  library_.check(graph_extension().end_capture(&args));
  work_count = args.work_count;
  return args.graph;
}

void Stream::launch_graph(TPD_Graph* graph) const {
  TPD_Graph_Launch_Args args{TPD_Graph_Launch_Args_STRUCT_SIZE, client_, graph, handle_};
  note_issued();
  library_.check(graph_extension().graph_launch(&args));
}

void Stream::destroy_graph(TPD_Graph* graph) const {
  TPD_Graph_Destroy_Args args{TPD_Graph_Destroy_Args_STRUCT_SIZE, client_, graph};
  library_.check(graph_extension().graph_destroy(&args));
}

void Stream::copy_async(void* destination, const void* source, size_t bytes, TPD_CopyKind kind) const {
  auto args = stream_args<TPD_Memory_CopyAsync_Args>(TPD_Memory_CopyAsync_Args_STRUCT_SIZE, client_, handle_);
  args.destination = destination;
  args.source = source;
  args.size = bytes;
  args.kind = kind;
  note_issued();
  library_.check(api_.memory_copy_async(&args));
}

void Stream::memset_async(void* pointer, int value, size_t bytes) const {
  auto args = stream_args<TPD_Memory_SetAsync_Args>(TPD_Memory_SetAsync_Args_STRUCT_SIZE, client_, handle_);
  args.pointer = pointer;
  args.value = value;
  args.size = bytes;
  note_issued();
  library_.check(api_.memory_set_async(&args));
}

void Stream::launch_kernel(TPD_Function* function, const TPD_KernelArg* args, size_t count) const {
  const TPD_KernelModulesExtension* modules = library_.kernel_modules();
  if (modules == nullptr) {
    throw DriverError(TPD_UNSUPPORTED, std::string("The driver ") + library_.name() +
                                           " offers no kernel modules, so no device kernel can be launched on it.");
  }
  auto launch = stream_args<TPD_Kernel_Launch_Args>(TPD_Kernel_Launch_Args_STRUCT_SIZE, client_, handle_);
  launch.function = function;
  launch.args = args;
  launch.arg_count = count;
  note_issued();
  library_.check(modules->kernel_launch(&launch));
}

}  // namespace torchplug::driver
