#pragma once
// Device memory shared between processes through the driver's IPC extension
// (TPD_IpcExtension): shareable memory, its handle, and the mapping of a
// handle in another process. No torch header here.
#include <array>
#include <cstddef>

#include "torchplug/driver.h"

namespace torchplug::driver {

class DeviceRuntime;

using IpcHandle = std::array<unsigned char, TPD_IPC_HANDLE_SIZE>;

// Memory of `device` other processes can open; freed with DeviceRuntime::free.
// DriverError(TPD_UNSUPPORTED) naming the backend and its driver when the
// driver offers no IPC extension (as every function here).
void* ipc_allocate(const DeviceRuntime& runtime, int device, size_t bytes);
// The handle of memory from ipc_allocate (its start).
IpcHandle ipc_get_handle(const DeviceRuntime& runtime, void* pointer);

struct IpcMapping {
  void* pointer;
  size_t size;
};
// Maps the memory `handle` names (from any process) as memory of `device`, until ipc_close.
IpcMapping ipc_open(const DeviceRuntime& runtime, int device, const IpcHandle& handle);
void ipc_close(const DeviceRuntime& runtime, void* pointer);

}  // namespace torchplug::driver
