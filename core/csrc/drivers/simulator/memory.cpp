// Device and pinned host memory, memset and copies.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"
#include "runtime/memory_guard.h"

namespace torchplug::simulator {
namespace {

bool overlap(const void* a, const void* b, size_t size) {
  const auto first = reinterpret_cast<uintptr_t>(a);
  const auto second = reinterpret_cast<uintptr_t>(b);
  return first < second + size && second < first + size;
}

// Host memory of a copy must not be device memory: that is a wrong copy kind.
void check_host(const Client& client, const void* pointer, const char* name, const char* kind) {
  if (pointer == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, std::string(name) + " is NULL; pass host memory for a " + kind + " copy.");
  }
  if (client.platform().device_of(pointer) >= 0) {
    throw Error(TPD_INVALID_ARGUMENT, std::string(name) + " is device memory, but a " + kind +
                                          " copy takes host memory there; use TPD_COPY_DEVICE_TO_DEVICE between "
                                          "two device pointers.");
  }
}

// Host to device. Pinned memory is read when the copy runs; pageable memory
// is read now, into a staging buffer the copy owns, since its caller may
// reuse it as soon as the call returns. (A device-to-host copy's destination,
// pageable or not, stays valid until the copy ran: it needs no staging.)
void copy_to_device(runtime::Platform& platform, runtime::Stream& stream, void* destination, const void* source,
                    size_t size) {
  if (platform.is_host_pinned(source)) {
    platform.memcpy_async(destination, source, size, stream);
    return;
  }
  std::shared_ptr<char[]> staged(new char[size]);  // shared: a std::function's captures must be copyable
  std::memcpy(staged.get(), source, size);
  stream.enqueue([destination, staged = std::move(staged), size] {
    runtime::KernelAccess access{destination};
    std::memcpy(destination, staged.get(), size);
  });
}

// Device memory (shareable or not) and pinned host memory are handed out and
// taken back alike; only the platform's and the client's calls for them differ.
enum class Memory { kDevice, kShareable, kPinnedHost };

void release(runtime::Platform& platform, Memory memory, void* pointer) {
  if (memory == Memory::kPinnedHost) {
    platform.host_free(pointer);
  } else {
    platform.free(pointer);
  }
}

void* platform_allocate(runtime::Platform& platform, Memory memory, int device, size_t size) {
  switch (memory) {
    case Memory::kDevice:
      return platform.malloc(device, size);
    case Memory::kShareable:
      return platform.malloc_shareable(device, size);
    case Memory::kPinnedHost:
      break;
  }
  return platform.host_malloc(size);
}

// `size` bytes of `memory` (on `device`, for device memory), recorded in the
// client so that free can check them. A size of 0 gives NULL, as the header says.
void* allocate(Client& client, Memory memory, int device, size_t size) {
  if (size == 0) {
    return nullptr;
  }
  runtime::Platform& platform = client.platform();
  void* pointer = platform_allocate(platform, memory, device, size);
  try {
    if (memory == Memory::kPinnedHost) {
      client.add_host_allocation(pointer);
    } else {
      client.add_allocation(pointer, size, Client::Origin::kAllocated);
    }
  } catch (...) {  // recording allocates: the memory must not leak when it fails
    release(platform, memory, pointer);
    throw;
  }
  return pointer;
}

// Frees `pointer` once the client has found it one of its live allocations of
// `memory` and forgotten it. NULL frees nothing, as free() does.
void free_allocation(Client& client, Memory memory, void* pointer) {
  if (pointer == nullptr) {
    return;
  }
  if (memory == Memory::kDevice) {
    client.remove_allocation(pointer, Client::Origin::kAllocated);
  } else {
    client.remove_host_allocation(pointer);
  }
  release(client.platform(), memory, pointer);
}

}  // namespace

void memory_allocate(TPD_Memory_Allocate_Args& args) {
  auto client = find_client(args.client, args.device);
  args.pointer = allocate(*client, Memory::kDevice, args.device, args.size);
}

void ipc::ipc_allocate(TPD_Ipc_Allocate_Args& args) {
  auto client = find_client(args.client, args.device);
  args.pointer = allocate(*client, Memory::kShareable, args.device, args.size);
}

void memory_free(TPD_Memory_Free_Args& args) {
  free_allocation(*find_client(args.client), Memory::kDevice, args.pointer);
}

void memory_get_info(TPD_Memory_GetInfo_Args& args) {
  auto client = find_client(args.client, args.device);
  runtime::Platform& platform = client->platform();
  const uint64_t total = platform.capacity(args.device);
  const auto used = static_cast<uint64_t>(platform.stats(args.device).used_bytes);
  args.free_bytes = total > used ? total - used : 0;
  args.total_bytes = total;
}

void host_memory_allocate(TPD_HostMemory_Allocate_Args& args) {
  args.pointer = allocate(*find_client(args.client), Memory::kPinnedHost, -1, args.size);
}

void host_memory_free(TPD_HostMemory_Free_Args& args) {
  free_allocation(*find_client(args.client), Memory::kPinnedHost, args.pointer);
}

void memory_set_async(TPD_Memory_SetAsync_Args& args) {
  auto client = find_client(args.client);
  auto stream = client->stream(args.stream);
  if (args.size == 0) {
    return;
  }
  client->check_device_memory(args.pointer, args.size, "TPD_Memory_SetAsync_Args.pointer");
  // As cudaMemsetAsync does, the value's low byte is written.
  stream->enqueue([pointer = args.pointer, value = static_cast<unsigned char>(args.value),
                   size = args.size] {
    runtime::KernelAccess access{pointer};
    std::memset(pointer, value, size);
  });
}

void memory_copy_async(TPD_Memory_CopyAsync_Args& args) {
  auto client = find_client(args.client);
  auto stream = client->stream(args.stream);
  if (args.size == 0) {
    return;
  }
  const int kind = enum_value(args.kind);
  switch (kind) {
    case TPD_COPY_HOST_TO_DEVICE:
      client->check_device_memory(args.destination, args.size, "TPD_Memory_CopyAsync_Args.destination");
      check_host(*client, args.source, "TPD_Memory_CopyAsync_Args.source", "host-to-device");
      copy_to_device(client->platform(), *stream, args.destination, args.source, args.size);
      return;
    case TPD_COPY_DEVICE_TO_HOST:
      client->check_device_memory(args.source, args.size, "TPD_Memory_CopyAsync_Args.source");
      check_host(*client, args.destination, "TPD_Memory_CopyAsync_Args.destination", "device-to-host");
      client->platform().memcpy_async(args.destination, args.source, args.size, *stream);
      return;
    case TPD_COPY_DEVICE_TO_DEVICE:
      client->check_device_memory(args.destination, args.size, "TPD_Memory_CopyAsync_Args.destination");
      client->check_device_memory(args.source, args.size, "TPD_Memory_CopyAsync_Args.source");
      if (overlap(args.destination, args.source, args.size)) {
        throw Error(TPD_INVALID_ARGUMENT,
                    "The source and destination of a device-to-device copy of " + std::to_string(args.size) +
                        " bytes overlap; copy through a temporary allocation.");
      }
      client->platform().memcpy_async(args.destination, args.source, args.size, *stream);
      return;
  }
  throw Error(TPD_INVALID_ARGUMENT, "TPD_Memory_CopyAsync_Args.kind is " + std::to_string(kind) +
                                        ", not a TPD_CopyKind; pass TPD_COPY_HOST_TO_DEVICE, "
                                        "TPD_COPY_DEVICE_TO_HOST or TPD_COPY_DEVICE_TO_DEVICE.");
}

}  // namespace torchplug::simulator
