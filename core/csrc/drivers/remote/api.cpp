// The remote driver's function table: every call goes to the device process
// (connection.h), whose memory this process never addresses. Device pointers,
// streams and events are the device process's values, passed through; the
// client handles and pinned host memory are this process's own.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <utility>

#include "drivers/common/errors.h"
#include "drivers/common/tables.h"
#include "drivers/remote/connection.h"
#include "drivers/remote/protocol.h"
#include "torchplug/driver.h"

#ifndef TORCHPLUG_SIMULATOR_VERSION
#error "TORCHPLUG_SIMULATOR_VERSION (the driver's release) must be defined by the build"
#endif

namespace torchplug::remote {

using drivers::checked_args;
using drivers::error_get_code;

namespace {

// A client, and what it was handed, kept here so that a kernel launch is
// checked before it is sent: launches go without waiting for an answer
// (Connection::post), so they must not fail in the device process.
struct RemoteClient {
  explicit RemoteClient(uint64_t remote_client) : remote(remote_client) {}
  const uint64_t remote;  // the device process's client
  mutable std::mutex mutex;
  std::map<uint64_t, uint64_t> allocations;  // device pointer -> bytes
  std::set<uint64_t> streams;
  std::map<uint64_t, uint64_t> functions;  // function -> its module

  // Throws TPD_INVALID_HANDLE unless `pointer` is inside device memory of this client; `what` names it.
  void check_device_memory(uint64_t pointer, const std::string& what) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto after = allocations.upper_bound(pointer);
    if (after != allocations.begin() && pointer < std::prev(after)->first + std::prev(after)->second) {
      return;
    }
    throw Error(TPD_INVALID_HANDLE, what + " is not device memory of this client: it was not returned by "
                                          "memory_allocate, or was freed. Pass memory that memory_allocate returned.");
  }
  void check_stream(uint64_t stream) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (streams.count(stream) == 0) {
      throw Error(TPD_INVALID_HANDLE, "The stream is not a live stream of this client: it was destroyed, or comes "
                                      "from another client or driver. Pass one that stream_create returned.");
    }
  }
  void check_function(uint64_t function) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (functions.count(function) == 0) {
      throw Error(TPD_INVALID_HANDLE, "The function is not a live function of this client: its module was "
                                      "unloaded, or it comes from another client. Pass one that "
                                      "module_get_function returned.");
    }
  }
};

std::mutex clients_mutex;
std::map<const TPD_Client*, std::unique_ptr<RemoteClient>> clients;
// Pinned host memory: a memory file mapped here and in the device process.
std::map<uintptr_t, size_t> pinned_blocks;  // address -> bytes

RemoteClient& find_client(const TPD_Client* handle) {
  if (handle == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "The client is NULL; pass one from client_create.");
  }
  std::lock_guard<std::mutex> lock(clients_mutex);
  auto found = clients.find(handle);
  if (found == clients.end()) {
    throw Error(TPD_INVALID_HANDLE,
                "The client is not one this driver created, or was destroyed; create one with client_create.");
  }
  return *found->second;
}

// Changes, under its lock, what is recorded of the client `handle`: what its
// device process handed it, for the checks of later launches.
template <typename Change>
void change_record(const TPD_Client* handle, Change&& change) {
  RemoteClient& client = find_client(handle);
  std::lock_guard<std::mutex> lock(client.mutex);
  change(client);
}

Request request_of(Op op, const TPD_Client* client) {
  Request request{};
  request.op = op;
  request.client = find_client(client).remote;
  return request;
}

uint64_t value_of(const void* pointer) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)); }

template <typename Pointer>
Pointer* handle_of(uint64_t value) {
  return reinterpret_cast<Pointer*>(static_cast<uintptr_t>(value));
}

// The pinned block holding [pointer, pointer + size), if one does: its start.
bool find_pinned(const void* pointer, size_t size, uintptr_t& block) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(clients_mutex);
  auto after = pinned_blocks.upper_bound(address);
  if (after == pinned_blocks.begin()) {
    return false;
  }
  --after;
  if (address + size > after->first + after->second) {
    return false;
  }
  block = after->first;
  return true;
}

// A memory file of `size` bytes mapped here, to hand the device process
// (its descriptor is sent with a request); closed and unmapped when done.
class SharedFile {
 public:
  explicit SharedFile(size_t size) : size_(size) {
    fd_ = ::memfd_create("torchplug-host-memory", MFD_CLOEXEC);
    if (fd_ < 0 || ::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      const int error = errno;
      release();
      throw Error(TPD_OUT_OF_MEMORY, "The host could not make " + std::to_string(size) +
                                         " bytes of memory to share with the device process: " +
                                         std::strerror(error) + ".");
    }
    void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (address == MAP_FAILED) {
      release();
      throw Error(TPD_OUT_OF_MEMORY, "The host could not map " + std::to_string(size) + " bytes of shared memory.");
    }
    mapped_ = static_cast<char*>(address);
  }
  ~SharedFile() { release(); }
  SharedFile(const SharedFile&) = delete;
  SharedFile& operator=(const SharedFile&) = delete;

  int fd() const { return fd_; }
  char* data() const { return mapped_; }
  // Keeps the mapping past this object (pinned memory); the descriptor is still closed.
  char* keep_mapping() { return std::exchange(mapped_, nullptr); }

 private:
  void release() {
    if (mapped_ != nullptr) {
      ::munmap(mapped_, size_);
    }
    if (fd_ >= 0) {
      ::close(fd_);
    }
    mapped_ = nullptr;
    fd_ = -1;
  }

  size_t size_;
  int fd_ = -1;
  char* mapped_ = nullptr;
};

// Sends a copy whose host side lies in pinned memory (registered with the
// device process) as such; false when `host` is pageable.
bool send_pinned_copy(Request& request, const void* host, size_t size) {
  uintptr_t block = 0;
  if (!find_pinned(host, size, block)) {
    return false;
  }
  request.mode = HostSide::kRegistered;
  request.host = block;
  request.offset = reinterpret_cast<uintptr_t>(host) - block;
  Connection::get().call(request);
  return true;
}

// "devices=N;memory=BYTES": the simulated devices the device process makes.
void parse_options(const char* options, Request& request) {
  if (options == nullptr || options[0] == '\0') {
    return;
  }
  std::string text(options);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t equals = item.find('=');
    const std::string key = item.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : item.substr(equals + 1);
    const bool number = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
    if (number && key == "devices") {
      request.offset = std::stoull(value);
    } else if (number && key == "memory") {
      request.size = std::stoull(value);
    } else if (!item.empty()) {
      throw Error(TPD_INVALID_ARGUMENT, "The remote driver's client options are \"devices=<count>;memory=<bytes "
                                        "per device>\", but got \"" +
                                            text + "\".");
    }
    start = end + 1;
  }
}

void client_create(TPD_Client_Create_Args& args) {
  if (args.name == nullptr || args.name[0] == '\0') {
    throw Error(TPD_INVALID_ARGUMENT,
                "TPD_Client_Create_Args.name is NULL or empty; pass the backend's device name (\"npu\").");
  }
  Request request{};
  request.op = Op::kClientCreate;
  parse_options(args.options, request);
  const Reply answer = Connection::get().call(request, args.name, std::strlen(args.name));
  auto client = std::make_unique<RemoteClient>(answer.values[0]);
  auto* handle = reinterpret_cast<TPD_Client*>(client.get());
  std::lock_guard<std::mutex> lock(clients_mutex);
  clients[handle] = std::move(client);
  args.client = handle;
}

void client_destroy(TPD_Client_Destroy_Args& args) {
  const uint64_t remote = find_client(args.client).remote;
  if (Connection::running_host_function_client() == remote) {
    throw Error(TPD_INVALID_ARGUMENT,
                "client_destroy was called from a host function running on one of the client's streams, and "
                "would wait for that function forever; destroy the client from another thread.");
  }
  Request request = request_of(Op::kClientDestroy, args.client);
  Connection::get().call(request);
  std::lock_guard<std::mutex> lock(clients_mutex);
  clients.erase(args.client);
}

void client_device_count(TPD_Client_DeviceCount_Args& args) {
  args.device_count = static_cast<int>(Connection::get().call(request_of(Op::kDeviceCount, args.client)).values[0]);
}

void device_get_properties(TPD_Device_GetProperties_Args& args) {
  if (args.properties == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Device_GetProperties_Args.properties is NULL; pass a TPD_DeviceProperties "
                                      "with its struct_size set.");
  }
  TPD_DeviceProperties& properties = checked_args(args.properties, TPD_DeviceProperties_STRUCT_SIZE,
                                                  "TPD_DeviceProperties");
  Request request = request_of(Op::kDeviceProperties, args.client);
  request.value = args.device;
  std::string bytes;
  Connection::get().call(request, nullptr, 0, -1, &bytes);
  TPD_DeviceProperties served{};
  std::memcpy(&served, bytes.data(), std::min(bytes.size(), sizeof served));
  // The device's memory is in the device process: this process cannot address it.
  std::snprintf(properties.name, sizeof properties.name, "torchplug remote %s", served.name);
  properties.total_memory = served.total_memory;
  properties.capabilities = served.capabilities & ~static_cast<uint64_t>(TPD_CAPABILITY_HOST_ADDRESSABLE_MEMORY);
  properties.stream_priority_greatest = served.stream_priority_greatest;
  properties.stream_priority_least = served.stream_priority_least;
  properties.memory_alignment = served.memory_alignment;
}

void memory_allocate(TPD_Memory_Allocate_Args& args) {
  Request request = request_of(Op::kMemoryAllocate, args.client);
  request.value = args.device;
  request.size = args.size;
  const uint64_t pointer = Connection::get().call(request).values[0];
  args.pointer = handle_of<void>(pointer);
  if (pointer != 0) {
    change_record(args.client, [&](RemoteClient& client) { client.allocations[pointer] = args.size; });
  }
}

void memory_free(TPD_Memory_Free_Args& args) {
  Request request = request_of(Op::kMemoryFree, args.client);
  request.device_pointer = value_of(args.pointer);
  Connection::get().call(request);
  change_record(args.client, [&](RemoteClient& client) { client.allocations.erase(request.device_pointer); });
}

void memory_get_info(TPD_Memory_GetInfo_Args& args) {
  Request request = request_of(Op::kMemoryInfo, args.client);
  request.value = args.device;
  const Reply answer = Connection::get().call(request);
  args.free_bytes = answer.values[0];
  args.total_bytes = answer.values[1];
}

void host_memory_allocate(TPD_HostMemory_Allocate_Args& args) {
  Request request = request_of(Op::kHostRegister, args.client);
  args.pointer = nullptr;
  if (args.size == 0) {
    return;
  }
  SharedFile file(args.size);
  request.host = value_of(file.data());
  request.size = args.size;
  Connection::get().call(request, nullptr, 0, file.fd());
  char* mapped = file.keep_mapping();
  std::lock_guard<std::mutex> lock(clients_mutex);
  pinned_blocks[reinterpret_cast<uintptr_t>(mapped)] = args.size;
  args.pointer = mapped;
}

void host_memory_free(TPD_HostMemory_Free_Args& args) {
  Request request = request_of(Op::kHostUnregister, args.client);
  if (args.pointer == nullptr) {
    return;
  }
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(clients_mutex);
    auto found = pinned_blocks.find(reinterpret_cast<uintptr_t>(args.pointer));
    if (found == pinned_blocks.end()) {
      throw Error(TPD_INVALID_HANDLE, "TPD_HostMemory_Free_Args.pointer is not the start of pinned memory from "
                                      "host_memory_allocate, or was freed.");
    }
    size = found->second;
    pinned_blocks.erase(found);
  }
  request.host = value_of(args.pointer);
  Connection::get().call(request);
  ::munmap(args.pointer, size);
}

void memory_set_async(TPD_Memory_SetAsync_Args& args) {
  Request request = request_of(Op::kMemorySet, args.client);
  request.stream = value_of(args.stream);
  request.device_pointer = value_of(args.pointer);
  request.value = args.value;
  request.size = args.size;
  Connection::get().call(request);
}

void copy_to_device(Request& request, const void* source, size_t size) {
  if (send_pinned_copy(request, source, size)) {
    return;
  }
  if (size <= kInlineBytes) {
    request.mode = HostSide::kInline;
    Connection::get().call(request, source, size);
    return;
  }
  // Pageable memory may be reused once the call returns: it is staged first.
  SharedFile staged(size);
  std::memcpy(staged.data(), source, size);
  request.mode = HostSide::kAttached;
  Connection::get().call(request, nullptr, 0, staged.fd());
}

// Into pageable memory the call returns once the stream ran the copy, as CUDA's does.
void copy_from_device(Request& request, void* destination, size_t size) {
  if (send_pinned_copy(request, destination, size)) {
    return;
  }
  if (size <= kInlineBytes) {
    request.mode = HostSide::kInline;
    std::string bytes;
    Connection::get().call(request, nullptr, 0, -1, &bytes);
    std::memcpy(destination, bytes.data(), std::min(bytes.size(), size));
    return;
  }
  SharedFile staged(size);
  request.mode = HostSide::kAttached;
  Connection::get().call(request, nullptr, 0, staged.fd());
  std::memcpy(destination, staged.data(), size);
}

void memory_copy_async(TPD_Memory_CopyAsync_Args& args) {
  Request request = request_of(Op::kCopyDevice, args.client);
  request.stream = value_of(args.stream);
  request.size = args.size;
  const int kind = static_cast<int>(args.kind);
  if (kind != TPD_COPY_HOST_TO_DEVICE && kind != TPD_COPY_DEVICE_TO_HOST && kind != TPD_COPY_DEVICE_TO_DEVICE) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Memory_CopyAsync_Args.kind is " + std::to_string(kind) +
                                          ", not a TPD_CopyKind; pass TPD_COPY_HOST_TO_DEVICE, "
                                          "TPD_COPY_DEVICE_TO_HOST or TPD_COPY_DEVICE_TO_DEVICE.");
  }
  if (args.size > 0 && args.source == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Memory_CopyAsync_Args.source is NULL.");
  }
  if (args.size > 0 && args.destination == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Memory_CopyAsync_Args.destination is NULL.");
  }
  if (args.size == 0 || kind == TPD_COPY_DEVICE_TO_DEVICE) {
    // Both sides in the device process (or nothing to copy: the stream is still checked there).
    request.device_pointer = value_of(args.destination);
    request.source_pointer = value_of(args.source);
    request.value = kind;
    Connection::get().call(request);
  } else if (kind == TPD_COPY_HOST_TO_DEVICE) {
    request.op = Op::kCopyToDevice;
    request.device_pointer = value_of(args.destination);
    copy_to_device(request, args.source, args.size);
  } else {
    request.op = Op::kCopyFromDevice;
    request.source_pointer = value_of(args.source);
    copy_from_device(request, args.destination, args.size);
  }
}

void stream_create(TPD_Stream_Create_Args& args) {
  Request request = request_of(Op::kStreamCreate, args.client);
  request.value = args.device;
  request.offset = static_cast<uint64_t>(static_cast<int64_t>(args.priority));
  const uint64_t stream = Connection::get().call(request).values[0];
  args.stream = handle_of<TPD_Stream>(stream);
  change_record(args.client, [&](RemoteClient& client) { client.streams.insert(stream); });
}

Request stream_request(Op op, const TPD_Client* client, const TPD_Stream* stream) {
  Request request = request_of(op, client);
  request.stream = value_of(stream);
  return request;
}

// Refuses to wait for `stream` from a host function running on it, which would wait for itself forever.
void check_not_inside(const TPD_Stream* stream, const char* what) {
  if (stream != nullptr && Connection::running_host_function_stream() == value_of(stream)) {
    throw Error(TPD_INVALID_ARGUMENT, std::string(what) +
                                          " was called from a host function running on that stream, and would wait "
                                          "for the function itself forever; call it from another thread.");
  }
}

void stream_destroy(TPD_Stream_Destroy_Args& args) {
  check_not_inside(args.stream, "stream_destroy");
  Connection::get().call(stream_request(Op::kStreamDestroy, args.client, args.stream));
  change_record(args.client, [&](RemoteClient& client) { client.streams.erase(value_of(args.stream)); });
}

void query_stream(TPD_Stream_Query_Args& args, Op op) {
  if (op != Op::kStreamQuery) {
    check_not_inside(args.stream, op == Op::kStreamSynchronize ? "stream_synchronize" : "stream_wait_idle");
  }
  const Reply answer = Connection::get().call(stream_request(op, args.client, args.stream));
  args.idle = static_cast<int>(answer.values[0]);
  args.failed = static_cast<int>(answer.values[1]);
}

void stream_wait_event(TPD_Stream_WaitEvent_Args& args) {
  Request request = stream_request(Op::kStreamWaitEvent, args.client, args.stream);
  request.event = value_of(args.event);
  Connection::get().call(request);
}

void stream_launch_host_function(TPD_Stream_LaunchHostFunction_Args& args) {
  if (args.function == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Stream_LaunchHostFunction_Args.function is NULL.");
  }
  Request request = stream_request(Op::kStreamLaunchHostFunction, args.client, args.stream);
  request.function = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(args.function));
  request.user_data = value_of(args.user_data);
  Connection::get().call(request);
}

void event_create(TPD_Event_Create_Args& args) {
  Request request = request_of(Op::kEventCreate, args.client);
  request.value = args.device;
  request.offset = static_cast<uint64_t>(args.enable_timing);
  args.event = handle_of<TPD_Event>(Connection::get().call(request).values[0]);
}

void query_event(TPD_Event_Query_Args& args, Op op) {
  Request request = request_of(op, args.client);
  request.event = value_of(args.event);
  args.completed = static_cast<int>(Connection::get().call(request).values[0]);
}

void event_record(TPD_Event_Record_Args& args) {
  Request request = stream_request(Op::kEventRecord, args.client, args.stream);
  request.event = value_of(args.event);
  Connection::get().call(request);
}

void event_elapsed_time(TPD_Event_ElapsedTime_Args& args) {
  Request request = request_of(Op::kEventElapsedTime, args.client);
  request.event = value_of(args.start);
  request.end_event = value_of(args.end);
  args.milliseconds = Connection::get().call(request).number;
}

void module_load(TPD_Module_Load_Args& args) {
  if (args.image == nullptr || args.image_size == 0) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Module_Load_Args.image is NULL or image_size is 0; pass the bytes of a "
                                      "module image (" TPD_KERNEL_FORMAT_HOST_ELF ").");
  }
  Request request = request_of(Op::kModuleLoad, args.client);
  SharedFile image(args.image_size);
  std::memcpy(image.data(), args.image, args.image_size);
  request.size = args.image_size;
  args.module = handle_of<TPD_Module>(Connection::get().call(request, nullptr, 0, image.fd()).values[0]);
}

void module_unload(TPD_Module_Unload_Args& args) {
  Request request = request_of(Op::kModuleUnload, args.client);
  request.function = value_of(args.module);
  Connection::get().call(request);
  change_record(args.client, [&](RemoteClient& client) {
    for (auto it = client.functions.begin(); it != client.functions.end();) {
      it = it->second == request.function ? client.functions.erase(it) : std::next(it);
    }
  });
}

void module_get_function(TPD_Module_GetFunction_Args& args) {
  if (args.name == nullptr || args.name[0] == '\0') {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Module_GetFunction_Args.name is NULL or empty; pass a kernel's name.");
  }
  Request request = request_of(Op::kModuleGetFunction, args.client);
  request.function = value_of(args.module);
  const uint64_t function = Connection::get().call(request, args.name, std::strlen(args.name)).values[0];
  args.function = handle_of<TPD_Function>(function);
  change_record(args.client, [&](RemoteClient& client) { client.functions[function] = request.function; });
}

void kernel_launch(TPD_Kernel_Launch_Args& args) {
  if (args.args == nullptr && args.arg_count > 0) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Kernel_Launch_Args.args is NULL but arg_count is " +
                                          std::to_string(args.arg_count) + "; pass the arguments.");
  }
  constexpr size_t kMostArgs = kInlineBytes / sizeof(TPD_KernelArg);
  if (args.arg_count > kMostArgs) {
    throw Error(TPD_INVALID_ARGUMENT, "A kernel launch takes at most " + std::to_string(kMostArgs) +
                                          " arguments on this driver, not " + std::to_string(args.arg_count) +
                                          "; pass larger argument lists in device memory.");
  }
  // Checked here as the device process would check it: the launch is posted,
  // so nothing of it may fail there but the kernel itself.
  const RemoteClient& client = find_client(args.client);
  client.check_stream(value_of(args.stream));
  client.check_function(value_of(args.function));
  for (size_t i = 0; i < args.arg_count; ++i) {
    const TPD_KernelArg& arg = args.args[i];
    const int kind = drivers::enum_value(arg.kind);
    if (kind == TPD_KERNEL_ARG_POINTER && arg.value.pointer != nullptr) {
      client.check_device_memory(value_of(arg.value.pointer), "Argument " + std::to_string(i) + " of the kernel");
    } else if (kind != TPD_KERNEL_ARG_POINTER && kind != TPD_KERNEL_ARG_INT64 && kind != TPD_KERNEL_ARG_FLOAT64) {
      throw Error(TPD_INVALID_ARGUMENT, "Argument " + std::to_string(i) + " of the kernel has kind " +
                                            std::to_string(kind) +
                                            ", not a TPD_KernelArgKind; pass TPD_KERNEL_ARG_POINTER, "
                                            "TPD_KERNEL_ARG_INT64 or TPD_KERNEL_ARG_FLOAT64.");
    }
  }
  Request request = stream_request(Op::kKernelLaunch, args.client, args.stream);
  request.function = value_of(args.function);
  Connection::get().post(request, args.args, args.arg_count * sizeof(TPD_KernelArg));
}

void event_timestamp(TPD_Profiler_EventTimestamp_Args& args) {
  Request request = request_of(Op::kEventTimestamp, args.client);
  request.event = value_of(args.event);
  args.nanoseconds = static_cast<int64_t>(Connection::get().call(request).values[0]);
}

// The members that share a request with others, told apart by its op.
void stream_query(TPD_Stream_Query_Args& args) { query_stream(args, Op::kStreamQuery); }
void stream_synchronize(TPD_Stream_Query_Args& args) { query_stream(args, Op::kStreamSynchronize); }
void stream_wait_idle(TPD_Stream_Query_Args& args) { query_stream(args, Op::kStreamWaitIdle); }
void event_destroy(TPD_Event_Query_Args& args) { query_event(args, Op::kEventDestroy); }
void event_query(TPD_Event_Query_Args& args) { query_event(args, Op::kEventQuery); }
void event_synchronize(TPD_Event_Query_Args& args) { query_event(args, Op::kEventSynchronize); }

}  // namespace
}  // namespace torchplug::remote

namespace torchplug::drivers {

TPD_Error* current_exception_error(const char* function) noexcept {
  try {
    return describe_current_exception(function, "torchplug remote driver");
  } catch (...) {  // making the TPD_Error failed
    return out_of_host_memory_error();
  }
}

}  // namespace torchplug::drivers

namespace torchplug::remote {

TPD_DRIVER_DEFINE_EXTENSION(profiler, TPD_ProfilerExtension, TPD_EXTENSION_PROFILER, nullptr, TPD_PROFILER_FUNCTIONS)
// The device process runs the host's machine code, so it loads the host's images.
TPD_DRIVER_DEFINE_EXTENSION(modules, TPD_KernelModulesExtension, TPD_EXTENSION_KERNEL_MODULES, &profiler::extension,
                            TPD_KERNEL_MODULE_FUNCTIONS, table.image_format = TPD_KERNEL_FORMAT_HOST_ELF;)

namespace {

const TPD_Api api = [] {
  TPD_Api table{};
  table.struct_size = TPD_Api_STRUCT_SIZE;
  table.extension_start = &modules::extension.base;
  table.api_version = {TPD_API_MAJOR, TPD_API_MINOR};
  table.driver_name = "torchplug remote";
  table.driver_version = TORCHPLUG_SIMULATOR_VERSION;
  table.error_destroy = drivers::error_destroy;
  table.error_message = drivers::error_message;
  TPD_API_FUNCTIONS(TPD_DRIVER_SET_MEMBER)
  return table;
}();

}  // namespace
}  // namespace torchplug::remote

extern "C" __attribute__((visibility("default"))) const TPD_Api* TPD_GetApi(void) { return &torchplug::remote::api; }
