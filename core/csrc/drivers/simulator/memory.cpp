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

}  // namespace

TPD_Error* memory_allocate(TPD_Memory_Allocate_Args* args) {
  return guarded("memory_allocate", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Memory_Allocate_Args, args);
    auto client = find_client(checked.client);
    client->check_device(checked.device);
    if (checked.size == 0) {
      checked.pointer = nullptr;
      return;
    }
    void* pointer = client->platform().malloc(checked.device, checked.size);
    try {
      client->add_allocation(pointer, checked.size);
    } catch (...) {
      client->platform().free(pointer);
      throw;
    }
    checked.pointer = pointer;
  });
}

TPD_Error* memory_free(TPD_Memory_Free_Args* args) {
  return guarded("memory_free", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Memory_Free_Args, args);
    auto client = find_client(checked.client);
    if (checked.pointer == nullptr) {
      return;
    }
    client->remove_allocation(checked.pointer);
    client->platform().free(checked.pointer);
  });
}

TPD_Error* memory_get_info(TPD_Memory_GetInfo_Args* args) {
  return guarded("memory_get_info", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Memory_GetInfo_Args, args);
    auto client = find_client(checked.client);
    client->check_device(checked.device);
    runtime::Platform& platform = client->platform();
    const uint64_t total = platform.capacity(checked.device);
    const auto used = static_cast<uint64_t>(platform.stats(checked.device).used_bytes);
    checked.free_bytes = total > used ? total - used : 0;
    checked.total_bytes = total;
  });
}

TPD_Error* host_memory_allocate(TPD_HostMemory_Allocate_Args* args) {
  return guarded("host_memory_allocate", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_HostMemory_Allocate_Args, args);
    auto client = find_client(checked.client);
    if (checked.size == 0) {  // as memory_allocate does
      checked.pointer = nullptr;
      return;
    }
    void* pointer = client->platform().host_malloc(checked.size);
    try {
      client->add_host_allocation(pointer);
    } catch (...) {
      client->platform().host_free(pointer);
      throw;
    }
    checked.pointer = pointer;
  });
}

TPD_Error* host_memory_free(TPD_HostMemory_Free_Args* args) {
  return guarded("host_memory_free", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_HostMemory_Free_Args, args);
    auto client = find_client(checked.client);
    if (checked.pointer == nullptr) {
      return;
    }
    client->remove_host_allocation(checked.pointer);
    client->platform().host_free(checked.pointer);
  });
}

TPD_Error* memory_set_async(TPD_Memory_SetAsync_Args* args) {
  return guarded("memory_set_async", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Memory_SetAsync_Args, args);
    auto client = find_client(checked.client);
    auto stream = client->stream(checked.stream);
    if (checked.size == 0) {
      return;
    }
    client->check_device_memory(checked.pointer, checked.size, "TPD_Memory_SetAsync_Args.pointer");
    // As cudaMemsetAsync does, the value's low byte is written.
    stream->enqueue([pointer = checked.pointer, value = static_cast<unsigned char>(checked.value),
                     size = checked.size] {
      runtime::KernelAccess access{pointer};
      std::memset(pointer, value, size);
    });
  });
}

TPD_Error* memory_copy_async(TPD_Memory_CopyAsync_Args* args) {
  return guarded("memory_copy_async", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Memory_CopyAsync_Args, args);
    auto client = find_client(checked.client);
    auto stream = client->stream(checked.stream);
    if (checked.size == 0) {
      return;
    }
    const int kind = enum_value(checked.kind);
    switch (kind) {
      case TPD_COPY_HOST_TO_DEVICE:
        client->check_device_memory(checked.destination, checked.size, "TPD_Memory_CopyAsync_Args.destination");
        check_host(*client, checked.source, "TPD_Memory_CopyAsync_Args.source", "host-to-device");
        copy_to_device(client->platform(), *stream, checked.destination, checked.source, checked.size);
        return;
      case TPD_COPY_DEVICE_TO_HOST:
        client->check_device_memory(checked.source, checked.size, "TPD_Memory_CopyAsync_Args.source");
        check_host(*client, checked.destination, "TPD_Memory_CopyAsync_Args.destination", "device-to-host");
        client->platform().memcpy_async(checked.destination, checked.source, checked.size, *stream);
        return;
      case TPD_COPY_DEVICE_TO_DEVICE:
        client->check_device_memory(checked.destination, checked.size, "TPD_Memory_CopyAsync_Args.destination");
        client->check_device_memory(checked.source, checked.size, "TPD_Memory_CopyAsync_Args.source");
        if (overlap(checked.destination, checked.source, checked.size)) {
          throw Error(TPD_INVALID_ARGUMENT,
                      "The source and destination of a device-to-device copy of " + std::to_string(checked.size) +
                          " bytes overlap; copy through a temporary allocation.");
        }
        client->platform().memcpy_async(checked.destination, checked.source, checked.size, *stream);
        return;
    }
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Memory_CopyAsync_Args.kind is " + std::to_string(kind) +
                                          ", not a TPD_CopyKind; pass TPD_COPY_HOST_TO_DEVICE, "
                                          "TPD_COPY_DEVICE_TO_HOST or TPD_COPY_DEVICE_TO_DEVICE.");
  });
}

}  // namespace torchplug::simulator
