#pragma once
// The messages between the remote driver (libtorchplug_remote, loaded by the
// process that uses the device) and the device process it starts
// (torchplug-device, which holds the device memory and serves a
// host-addressable driver, the simulator, inside itself). Both are built from
// this header together, and the hello exchange checks kProtocolVersion, so the
// structs travel as they are: one Request or Reply per datagram of a
// SOCK_SEQPACKET socket pair, followed by its payload. Device pointers, stream
// and event handles are the device process's own values; the using process
// only passes them back. Pinned host memory is a memory file both processes
// map; larger pageable copies attach a memory file of their own.
#include <cstddef>
#include <cstdint>

namespace torchplug::remote {

constexpr uint32_t kProtocolVersion = 2;
// The descriptor the device process finds its end of the socket pair at.
constexpr int kDeviceProcessSocket = 3;
// Copies up to this size travel inside their message.
constexpr size_t kInlineBytes = 32 * 1024;
// The largest datagram: a header and inline bytes or a message text.
constexpr size_t kMaxMessage = kInlineBytes + 4096;

enum class Op : uint32_t {
  kHello = 1,
  kClientCreate,  // payload: the name; `offset` devices and `size` bytes each to configure (0: the driver's own)
  kClientDestroy,
  kDeviceCount,
  kDeviceProperties,
  kMemoryAllocate,
  kMemoryFree,
  kMemoryInfo,
  kMemorySet,
  kHostRegister,    // attaches the pinned block's memory file; `host` its address in the using process
  kHostUnregister,
  kCopyDevice,      // device to device
  kCopyToDevice,    // `mode` says where the bytes are (HostSide)
  kCopyFromDevice,  // the reply comes once the stream ran the copy, unless `mode` is kRegistered
  kStreamCreate,
  kStreamDestroy,
  kStreamQuery,
  kStreamSynchronize,
  kStreamWaitIdle,
  kStreamWaitEvent,
  kStreamLaunchHostFunction,
  kEventCreate,
  kEventDestroy,
  kEventRecord,
  kEventQuery,
  kEventSynchronize,
  kEventElapsedTime,
  kEventTimestamp,
  kHostFunctionDone,  // the answer to a kRunHostFunction: `id` is its id, `value` the status, payload the message
  kModuleLoad,        // attaches a memory file of `size` bytes: the image
  kModuleUnload,      // `function` is the module
  kModuleGetFunction, // `function` is the module; payload: the name
  kKernelLaunch,      // `function` is the function; payload: its TPD_KernelArg array
};

// Where the host side of a copy is.
enum class HostSide : uint32_t {
  kInline = 0,      // in the request (to the device) or the reply (from the device)
  kRegistered = 1,  // pinned memory of kHostRegister: `host` its address, `offset` into it
  kAttached = 2,    // a memory file attached to the request, for this copy alone
};

// The id of a posted request (Connection::post), which gets no reply: a
// failure to serve it fails the request's stream instead.
constexpr uint64_t kPostedRequest = 0;

struct Request {
  Op op;
  HostSide mode;
  uint64_t id;  // echoed by the reply; kPostedRequest for none
  uint64_t client;
  uint64_t stream;
  uint64_t event;  // the start event of kEventElapsedTime
  uint64_t end_event;
  uint64_t device_pointer;  // the destination of a device-to-device copy
  uint64_t source_pointer;
  uint64_t host;
  uint64_t offset;
  uint64_t size;
  int64_t value;  // device, priority, memset byte, enable_timing, host function status
  uint64_t function;
  uint64_t user_data;
};

enum class ReplyKind : uint32_t {
  kReply = 1,
  kRunHostFunction = 2,  // `id` names the call; values: function, user_data, client, stream
};

struct Reply {
  ReplyKind kind;
  int32_t code;  // TPD_ErrorCode; when not TPD_SUCCESS the payload is the message
  uint64_t id;
  uint64_t values[4];
  double number;
};

// One datagram with at most one attached descriptor. Returns false when the
// peer is gone; throws std::system_error on other socket failures.
bool send_message(int socket, const void* header, size_t header_size, const void* payload, size_t payload_size,
                  int attached_fd = -1);
// Receives one datagram into `buffer` (kMaxMessage bytes): its size, 0 when
// the peer is gone. `attached_fd` (optional) takes a descriptor sent with it, else -1.
size_t receive_message(int socket, void* buffer, int* attached_fd = nullptr);

}  // namespace torchplug::remote
