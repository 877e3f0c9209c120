// Serving the remote driver's requests (protocol.h) with the driver loaded here.
#include "drivers/device_process/server.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

namespace torchplug::device_process {
namespace {

using remote::HostSide;
using remote::Op;
using remote::Reply;
using remote::ReplyKind;
using remote::Request;

template <typename Pointer>
Pointer* handle_of(uint64_t value) {
  return reinterpret_cast<Pointer*>(static_cast<uintptr_t>(value));
}

uint64_t value_of(const void* pointer) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)); }

// Requests that may wait for a stream run on a thread of their own, so that
// the receiving thread stays free for the host-function answers they may
// depend on; every other request is answered in arrival order (a wait
// with nothing left to wait for is answered at once, without a thread).
bool may_wait(Op op) {
  switch (op) {
    case Op::kClientDestroy:
    case Op::kStreamDestroy:
    case Op::kStreamSynchronize:
    case Op::kStreamWaitIdle:
    case Op::kEventDestroy:
    case Op::kEventSynchronize:
      return true;
    default:
      return false;
  }
}

// A memory file of the using process, mapped here for one copy or a pinned block.
char* map_file(int fd, uint64_t size) {
  void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (address == MAP_FAILED) {
    throw Failure{TPD_OUT_OF_MEMORY, "The device process could not map " + std::to_string(size) +
                                         " bytes of host memory shared with it: " + std::strerror(errno) + "."};
  }
  return static_cast<char*>(address);
}

// A copy the device process runs in a stream's order, between device memory
// and host memory it can address; `finish` runs after it (unmapping, answering).
struct StreamCopy {
  void* destination;
  const void* source;
  size_t size;
  std::function<void()> finish;
};

int run_stream_copy(void* data, char* /*message*/, size_t /*message_size*/) {
  std::unique_ptr<StreamCopy> copy(static_cast<StreamCopy*>(data));
  std::memcpy(copy->destination, copy->source, copy->size);
  if (copy->finish) {
    copy->finish();
  }
  return 0;
}

struct RemoteHostFunction {
  Server* server;
  uint64_t client;
  uint64_t stream;
  uint64_t function;
  uint64_t user_data;
};

int run_remote_host_function(void* data, char* message, size_t message_size) {
  std::unique_ptr<RemoteHostFunction> call(static_cast<RemoteHostFunction*>(data));
  std::string text;
  const int status = call->server->run_host_function(call->client, call->stream, call->function, call->user_data, text);
  if (status != 0 && message_size > 0) {
    const size_t length = std::min(text.size(), message_size - 1);
    std::memcpy(message, text.data(), length);
    message[length] = '\0';
  }
  return status;
}

// A host function of the device process itself that fails its stream with
// the message `data` (a heap std::string it owns).
int fail_with_message(void* data, char* message, size_t message_size) {
  std::unique_ptr<std::string> text(static_cast<std::string*>(data));
  if (message_size > 0) {
    const size_t length = std::min(text->size(), message_size - 1);
    std::memcpy(message, text->data(), length);
    message[length] = '\0';
  }
  return 1;
}

}  // namespace

void Server::run() {
  std::vector<char> buffer(remote::kMaxMessage);
  for (;;) {
    int attached = -1;
    const size_t size = remote::receive_message(socket_, buffer.data(), &attached);
    if (size == 0) {
      return;  // the using process exited or closed the device
    }
    if (size < sizeof(Request)) {
      if (attached >= 0) {
        ::close(attached);
      }
      continue;
    }
    Request request;
    std::memcpy(&request, buffer.data(), sizeof request);
    const char* payload = buffer.data() + sizeof request;
    const size_t payload_size = size - sizeof request;
    if (request.op == Op::kHostFunctionDone) {
      finish_host_call(request.id, static_cast<int>(request.value), std::string(payload, payload_size));
    } else if (may_wait(request.op) && !settled(request)) {
      std::thread([this, request] { handle(request, nullptr, 0, -1); }).detach();
    } else {
      handle(request, payload, payload_size, attached);
    }
  }
}

bool Server::settled(const Request& request) {
  auto* client = handle_of<TPD_Client>(request.client);
  TPD_Error* error = nullptr;
  bool nothing_queued = false;
  if (request.op == Op::kStreamSynchronize || request.op == Op::kStreamWaitIdle) {
    TPD_Stream_Query_Args args{TPD_Stream_Query_Args_STRUCT_SIZE, client, handle_of<TPD_Stream>(request.stream), 0, 0};
    error = api_.stream_query(&args);
    nothing_queued = args.idle != 0;  // a failed stream may still be draining: it waits like any other
  } else if (request.op == Op::kEventSynchronize) {
    TPD_Event_Query_Args args{TPD_Event_Query_Args_STRUCT_SIZE, client, handle_of<TPD_Event>(request.event), 0};
    error = api_.event_query(&args);
    nothing_queued = args.completed != 0;
  }
  if (error != nullptr) {
    // A bad handle: the request itself fails at once, with the driver's own message.
    TPD_Error_Destroy_Args destroy{TPD_Error_Destroy_Args_STRUCT_SIZE, error};
    api_.error_destroy(&destroy);
    return true;
  }
  return nothing_queued;
}

void Server::reply(uint64_t id, const Reply& answer, const void* payload, size_t size) {
  Reply sent = answer;
  sent.kind = ReplyKind::kReply;
  sent.id = id;
  remote::send_message(socket_, &sent, sizeof sent, payload, size);
}

void Server::reply_failure(uint64_t id, const Failure& failure) {
  Reply answer{};
  answer.code = failure.code;
  const size_t size = std::min(failure.message.size(), remote::kMaxMessage - sizeof answer);
  reply(id, answer, failure.message.data(), size);
}

void Server::check(TPD_Error* error) {
  if (error == nullptr) {
    return;
  }
  TPD_Error_GetCode_Args code{TPD_Error_GetCode_Args_STRUCT_SIZE, error, TPD_INTERNAL};
  TPD_Error* code_error = api_.error_get_code(&code);
  TPD_Error_Message_Args message{TPD_Error_Message_Args_STRUCT_SIZE, error, nullptr, 0};
  api_.error_message(&message);
  Failure failure{code_error == nullptr ? code.code : TPD_INTERNAL, std::string(message.message, message.message_size)};
  TPD_Error_Destroy_Args destroy{TPD_Error_Destroy_Args_STRUCT_SIZE, error};
  api_.error_destroy(&destroy);
  throw failure;
}

void Server::handle(const Request& request, const char* payload, size_t payload_size, int attached) {
  Reply answer{};
  std::string answer_payload;
  try {
    serve(request, payload, payload_size, attached, answer, answer_payload);
  } catch (const Failure& failure) {
    answer_failure(request, failure);
    return;
  } catch (const std::exception& error) {
    answer_failure(request, {TPD_INTERNAL, std::string("The device process failed: ") + error.what() +
                                               " (a defect of the torchplug remote driver; please report it)."});
    return;
  }
  if (request.id == remote::kPostedRequest) {
    return;
  }
  // Copies from the device answer once the stream ran them, unless into pinned memory.
  if (request.op != Op::kCopyFromDevice || request.mode == HostSide::kRegistered) {
    reply(request.id, answer, answer_payload.data(), answer_payload.size());
  }
}

void Server::serve(const Request& request, const char* payload, size_t payload_size, int attached, Reply& answer,
                   std::string& answer_payload) {
  auto* client = handle_of<TPD_Client>(request.client);
  auto* stream = handle_of<TPD_Stream>(request.stream);
  auto* event = handle_of<TPD_Event>(request.event);
  const int device = static_cast<int>(request.value);
  switch (request.op) {
    case Op::kHello: {
      answer.values[0] = remote::kProtocolVersion;
      return;
    }
    case Op::kClientCreate: {
      // payload: the name; a device count and capacity (the remote client's options) configure the simulator.
      const std::string name(payload, payload_size);
      TPD_Client_Create_Args args{TPD_Client_Create_Args_STRUCT_SIZE, name.c_str(), nullptr, nullptr};
      check(api_.client_create(&args));
      answer.values[0] = value_of(args.client);
      if (request.size > 0 || request.offset > 0) {
        configure(args.client, static_cast<int>(request.offset), request.size);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      allocations_[answer.values[0]];
      return;
    }
    case Op::kClientDestroy: {
      TPD_Client_Destroy_Args args{TPD_Client_Destroy_Args_STRUCT_SIZE, client};
      check(api_.client_destroy(&args));
      std::lock_guard<std::mutex> lock(mutex_);
      allocations_.erase(request.client);
      return;
    }
    case Op::kDeviceCount: {
      TPD_Client_DeviceCount_Args args{TPD_Client_DeviceCount_Args_STRUCT_SIZE, client, 0};
      check(api_.client_device_count(&args));
      answer.values[0] = static_cast<uint64_t>(args.device_count);
      return;
    }
    case Op::kDeviceProperties: {
      TPD_DeviceProperties properties{};
      properties.struct_size = TPD_DeviceProperties_STRUCT_SIZE;
      TPD_Device_GetProperties_Args args{TPD_Device_GetProperties_Args_STRUCT_SIZE, client, device, &properties};
      check(api_.device_get_properties(&args));
      answer_payload.assign(reinterpret_cast<const char*>(&properties), sizeof properties);
      return;
    }
    case Op::kMemoryAllocate: {
      TPD_Memory_Allocate_Args args{TPD_Memory_Allocate_Args_STRUCT_SIZE, client, device, request.size, nullptr};
      check(api_.memory_allocate(&args));
      answer.values[0] = value_of(args.pointer);
      if (args.pointer != nullptr) {
        std::lock_guard<std::mutex> lock(mutex_);
        allocations_[request.client][answer.values[0]] = request.size;
      }
      return;
    }
    case Op::kMemoryFree: {
      TPD_Memory_Free_Args args{TPD_Memory_Free_Args_STRUCT_SIZE, client, handle_of<void>(request.device_pointer)};
      check(api_.memory_free(&args));
      std::lock_guard<std::mutex> lock(mutex_);
      allocations_[request.client].erase(request.device_pointer);
      return;
    }
    case Op::kMemoryInfo: {
      const auto info = call(api_.memory_get_info,
                             TPD_Memory_GetInfo_Args{TPD_Memory_GetInfo_Args_STRUCT_SIZE, client, device, 0, 0});
      answer.values[0] = info.free_bytes;
      answer.values[1] = info.total_bytes;
      return;
    }
    case Op::kMemorySet: {
      TPD_Memory_SetAsync_Args args{TPD_Memory_SetAsync_Args_STRUCT_SIZE, client, stream,
                                    handle_of<void>(request.device_pointer), static_cast<int>(request.value),
                                    request.size};
      check(api_.memory_set_async(&args));
      return;
    }
    case Op::kHostRegister: {
      char* address = map_file(attached, request.size);
      std::lock_guard<std::mutex> lock(mutex_);
      pinned_[request.host] = {address, request.size};
      return;
    }
    case Op::kHostUnregister: {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = pinned_.find(request.host);
      if (found != pinned_.end()) {
        ::munmap(found->second.first, found->second.second);
        pinned_.erase(found);
      }
      return;
    }
    case Op::kCopyDevice: {
      TPD_Memory_CopyAsync_Args args{TPD_Memory_CopyAsync_Args_STRUCT_SIZE,
                                     client,
                                     stream,
                                     handle_of<void>(request.device_pointer),
                                     handle_of<const void>(request.source_pointer),
                                     request.size,
                                     static_cast<TPD_CopyKind>(request.value)};
      check(api_.memory_copy_async(&args));
      return;
    }
    case Op::kCopyToDevice:
      copy_to_device(request, payload, payload_size, attached);
      return;
    case Op::kCopyFromDevice:
      copy_from_device(request, attached);
      return;
    case Op::kStreamCreate:
    case Op::kEventCreate: {
      const int flags = static_cast<int>(request.offset);  // a stream's priority, an event's flags
      answer.values[0] =
          request.op == Op::kStreamCreate
              ? value_of(call(api_.stream_create,
                              TPD_Stream_Create_Args{TPD_Stream_Create_Args_STRUCT_SIZE, client, device, flags, nullptr})
                             .stream)
              : value_of(call(api_.event_create,
                              TPD_Event_Create_Args{TPD_Event_Create_Args_STRUCT_SIZE, client, device, flags, nullptr})
                             .event);
      return;
    }
    case Op::kStreamDestroy:
      call(api_.stream_destroy, TPD_Stream_Destroy_Args{TPD_Stream_Destroy_Args_STRUCT_SIZE, client, stream});
      return;
    case Op::kStreamQuery:
    case Op::kStreamSynchronize:
    case Op::kStreamWaitIdle: {
      auto function = request.op == Op::kStreamQuery        ? api_.stream_query
                      : request.op == Op::kStreamSynchronize ? api_.stream_synchronize
                                                             : api_.stream_wait_idle;
      const auto state = call(function, TPD_Stream_Query_Args{TPD_Stream_Query_Args_STRUCT_SIZE, client, stream, 0, 0});
      answer.values[0] = static_cast<uint64_t>(state.idle);
      answer.values[1] = static_cast<uint64_t>(state.failed);
      return;
    }
    case Op::kStreamWaitEvent:
      call(api_.stream_wait_event,
           TPD_Stream_WaitEvent_Args{TPD_Stream_WaitEvent_Args_STRUCT_SIZE, client, stream, event});
      return;
    case Op::kStreamLaunchHostFunction: {
      auto call = std::make_unique<RemoteHostFunction>(
          RemoteHostFunction{this, request.client, request.stream, request.function, request.user_data});
      enqueue_host_function(request.client, request.stream, run_remote_host_function, call.get());
      call.release();  // run_remote_host_function owns it now
      return;
    }
    case Op::kEventDestroy:
    case Op::kEventQuery:
    case Op::kEventSynchronize: {
      auto function = request.op == Op::kEventDestroy ? api_.event_destroy
                      : request.op == Op::kEventQuery ? api_.event_query
                                                      : api_.event_synchronize;
      const auto state = call(function, TPD_Event_Query_Args{TPD_Event_Query_Args_STRUCT_SIZE, client, event, 0});
      answer.values[0] = static_cast<uint64_t>(state.completed);
      return;
    }
    case Op::kEventRecord:
      call(api_.event_record, TPD_Event_Record_Args{TPD_Event_Record_Args_STRUCT_SIZE, client, event, stream});
      return;
    case Op::kEventElapsedTime:
      answer.number = call(api_.event_elapsed_time,
                           TPD_Event_ElapsedTime_Args{TPD_Event_ElapsedTime_Args_STRUCT_SIZE, client, event,
                                                      handle_of<TPD_Event>(request.end_event), 0.0})
                          .milliseconds;
      return;
    case Op::kEventTimestamp: {
      const auto& profiler = served_extension<TPD_ProfilerExtension>(TPD_EXTENSION_PROFILER, "profiler");
      TPD_Profiler_EventTimestamp_Args args{TPD_Profiler_EventTimestamp_Args_STRUCT_SIZE, client, event, 0};
      check(profiler.event_timestamp(&args));
      answer.values[0] = static_cast<uint64_t>(args.nanoseconds);
      return;
    }
    case Op::kModuleLoad: {
      const auto& modules = served_extension<TPD_KernelModulesExtension>(TPD_EXTENSION_KERNEL_MODULES, "kernel-modules");
      if (attached < 0 || request.size == 0) {
        throw Failure{TPD_INVALID_ARGUMENT, "A module load came without its image."};
      }
      char* image = map_file(attached, request.size);
      TPD_Module_Load_Args args{TPD_Module_Load_Args_STRUCT_SIZE, client, image, request.size, nullptr};
      TPD_Error* error = modules.module_load(&args);
      ::munmap(image, request.size);
      check(error);
      answer.values[0] = value_of(args.module);
      return;
    }
    case Op::kModuleUnload: {
      const auto& modules = served_extension<TPD_KernelModulesExtension>(TPD_EXTENSION_KERNEL_MODULES, "kernel-modules");
      TPD_Module_Unload_Args args{TPD_Module_Unload_Args_STRUCT_SIZE, client, handle_of<TPD_Module>(request.function)};
      check(modules.module_unload(&args));
      return;
    }
    case Op::kModuleGetFunction: {
      const auto& modules = served_extension<TPD_KernelModulesExtension>(TPD_EXTENSION_KERNEL_MODULES, "kernel-modules");
      const std::string name(payload, payload_size);
      TPD_Module_GetFunction_Args args{TPD_Module_GetFunction_Args_STRUCT_SIZE, client,
                                       handle_of<TPD_Module>(request.function), name.c_str(), nullptr};
      check(modules.module_get_function(&args));
      answer.values[0] = value_of(args.function);
      return;
    }
    case Op::kKernelLaunch: {
      const auto& modules = served_extension<TPD_KernelModulesExtension>(TPD_EXTENSION_KERNEL_MODULES, "kernel-modules");
      std::vector<TPD_KernelArg> kernel_args(payload_size / sizeof(TPD_KernelArg));
      std::memcpy(kernel_args.data(), payload, kernel_args.size() * sizeof(TPD_KernelArg));
      TPD_Kernel_Launch_Args args{TPD_Kernel_Launch_Args_STRUCT_SIZE, client, stream,
                                  handle_of<TPD_Function>(request.function), kernel_args.data(), kernel_args.size()};
      check(modules.kernel_launch(&args));
      return;
    }
    case Op::kHostFunctionDone:
      return;
  }
  throw Failure{TPD_INTERNAL, "The device process got request " + std::to_string(static_cast<uint32_t>(request.op)) +
                                  ", which it does not know (a remote driver of another release?)."};
}

void Server::configure(TPD_Client* client, int device_count, uint64_t capacity) {
  const TPD_SimulatorExtension* controls = nullptr;
  for (const TPD_ExtensionBase* extension = api_.extension_start; extension != nullptr; extension = extension->next) {
    if (extension->type == TPD_EXTENSION_SIMULATOR) {
      controls = reinterpret_cast<const TPD_SimulatorExtension*>(extension);
    }
  }
  if (controls == nullptr) {
    throw Failure{TPD_INVALID_ARGUMENT, "The device process's driver cannot be configured: leave out the remote "
                                        "driver's \"devices\" and \"memory\" options."};
  }
  // An option left out keeps what the devices have.
  if (device_count == 0) {
    TPD_Client_DeviceCount_Args count{TPD_Client_DeviceCount_Args_STRUCT_SIZE, client, 0};
    check(api_.client_device_count(&count));
    device_count = count.device_count;
  }
  if (capacity == 0) {
    TPD_DeviceProperties properties{};
    properties.struct_size = TPD_DeviceProperties_STRUCT_SIZE;
    TPD_Device_GetProperties_Args args{TPD_Device_GetProperties_Args_STRUCT_SIZE, client, 0, &properties};
    check(api_.device_get_properties(&args));
    capacity = properties.total_memory;
  }
  TPD_Simulator_Configure_Args args{TPD_Simulator_Configure_Args_STRUCT_SIZE, client, device_count, capacity};
  check(controls->configure(&args));
}

void Server::check_device_range(uint64_t client, uint64_t pointer, uint64_t size, const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto known = allocations_.find(client);
  if (known == allocations_.end()) {
    throw Failure{TPD_INVALID_HANDLE, "The client is not one of this driver's, or was destroyed."};
  }
  auto after = known->second.upper_bound(pointer);
  if (after == known->second.begin() || pointer + size > std::prev(after)->first + std::prev(after)->second ||
      pointer + size < pointer) {
    throw Failure{TPD_INVALID_HANDLE, std::string(what) + " (" + std::to_string(size) +
                                          " bytes) is not inside device memory this client allocated; pass "
                                          "memory from memory_allocate, within its size."};
  }
}

char* Server::registered(uint64_t host, uint64_t offset, uint64_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = pinned_.find(host);
  if (found == pinned_.end() || offset + size > found->second.second) {
    throw Failure{TPD_INTERNAL, "A copy named pinned memory the device process does not have mapped (a defect of "
                                "the torchplug remote driver; please report it)."};
  }
  return found->second.first + offset;
}

void Server::answer_failure(const Request& request, const Failure& failure) {
  if (request.id != remote::kPostedRequest) {
    reply_failure(request.id, failure);
    return;
  }
  // Nobody waits for a posted request: its stream fails in its place, as a
  // kernel's fault would, and the next synchronizing call reports it.
  auto message = std::make_unique<std::string>(failure.message);
  try {
    enqueue_host_function(request.client, request.stream, fail_with_message, message.get());
    message.release();  // fail_with_message owns it now
  } catch (const Failure& unqueued) {
    std::fprintf(stderr, "torchplug-device: a posted request failed (%s) and its stream could not report it: %s\n",
                 failure.message.c_str(), unqueued.message.c_str());
  }
}

void Server::enqueue_host_function(uint64_t client, uint64_t stream, TPD_HostFunction function, void* data) {
  TPD_Stream_LaunchHostFunction_Args args{TPD_Stream_LaunchHostFunction_Args_STRUCT_SIZE, handle_of<TPD_Client>(client),
                                          handle_of<TPD_Stream>(stream), function, data};
  check(api_.stream_launch_host_function(&args));
}

void Server::copy_to_device(const Request& request, const char* payload, size_t payload_size, int attached) {
  if (request.mode == HostSide::kInline) {
    // The driver stages pageable bytes before it returns, as the interface asks.
    TPD_Memory_CopyAsync_Args args{TPD_Memory_CopyAsync_Args_STRUCT_SIZE,
                                   handle_of<TPD_Client>(request.client),
                                   handle_of<TPD_Stream>(request.stream),
                                   handle_of<void>(request.device_pointer),
                                   payload,
                                   std::min<uint64_t>(request.size, payload_size),
                                   TPD_COPY_HOST_TO_DEVICE};
    check(api_.memory_copy_async(&args));
    return;
  }
  std::unique_ptr<StreamCopy> copy;
  if (request.mode == HostSide::kAttached) {
    char* mapped = map_file(attached, request.size);
    copy.reset(new StreamCopy{handle_of<void>(request.device_pointer), mapped, request.size,
                              [mapped, size = request.size] { ::munmap(mapped, size); }});
  } else {
    copy.reset(new StreamCopy{handle_of<void>(request.device_pointer),
                              registered(request.host, request.offset, request.size), request.size, nullptr});
  }
  try {
    check_device_range(request.client, request.device_pointer, request.size, "The copy's destination");
    enqueue_host_function(request.client, request.stream, run_stream_copy, copy.get());
  } catch (...) {
    if (copy->finish) {
      copy->finish();
    }
    throw;
  }
  copy.release();
}

void Server::copy_from_device(const Request& request, int attached) {
  const uint64_t id = request.id;
  std::unique_ptr<StreamCopy> copy;
  if (request.mode == HostSide::kRegistered) {
    copy.reset(new StreamCopy{registered(request.host, request.offset, request.size),
                              handle_of<const void>(request.source_pointer), request.size, nullptr});
  } else if (request.mode == HostSide::kAttached) {
    char* mapped = map_file(attached, request.size);
    copy.reset(new StreamCopy{mapped, handle_of<const void>(request.source_pointer), request.size,
                              [this, id, mapped, size = request.size] {
                                ::munmap(mapped, size);
                                reply(id, Reply{});
                              }});
  } else {
    auto bytes = std::make_shared<std::vector<char>>(request.size);
    copy.reset(new StreamCopy{bytes->data(), handle_of<const void>(request.source_pointer), request.size,
                              [this, id, bytes] { reply(id, Reply{}, bytes->data(), bytes->size()); }});
  }
  try {
    check_device_range(request.client, request.source_pointer, request.size, "The copy's source");
    enqueue_host_function(request.client, request.stream, run_stream_copy, copy.get());
  } catch (...) {
    if (request.mode == HostSide::kAttached) {
      ::munmap(copy->destination, request.size);
    }
    throw;
  }
  copy.release();
}

int Server::run_host_function(uint64_t client, uint64_t stream, uint64_t function, uint64_t user_data,
                              std::string& message) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_host_call_++;
    host_calls_[id];
  }
  Reply call{};
  call.kind = ReplyKind::kRunHostFunction;
  call.id = id;
  call.values[0] = function;
  call.values[1] = user_data;
  call.values[2] = client;
  call.values[3] = stream;
  if (!remote::send_message(socket_, &call, sizeof call, nullptr, 0)) {
    message = "the process that queued the host function exited";
    return 1;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  host_call_done_.wait(lock, [&] { return host_calls_[id].done; });
  const int status = host_calls_[id].status;
  message = std::move(host_calls_[id].message);
  host_calls_.erase(id);
  return status;
}

void Server::finish_host_call(uint64_t id, int status, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = host_calls_.find(id);
    if (found == host_calls_.end()) {
      return;
    }
    found->second = {true, status, std::move(message)};
  }
  host_call_done_.notify_all();
}

}  // namespace torchplug::device_process
