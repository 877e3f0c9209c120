#include "driver/ipc.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "driver/call_args.h"
#include "driver/device_runtime.h"
#include "driver/driver_library.h"

namespace torchplug::driver {
namespace {

const TPD_IpcExtension& extension(const DeviceRuntime& runtime) {
  const DriverLibrary& library = runtime.library();
  if (library.ipc() == nullptr) {
    throw DriverError(TPD_UNSUPPORTED,
                      "Cannot share '" + runtime.name() + "' device memory between processes: the '" +
                          runtime.name() + "' devices run on the driver " + library.name() + " (" + library.path() +
                          "), which offers no IPC extension (TPD_EXTENSION_IPC, TPD_IpcExtension in "
                          "torchplug/driver.h). Send the tensor's data through the CPU instead (tensor.cpu()), or "
                          "use a driver that implements the IPC extension.");
  }
  return *library.ipc();
}

}  // namespace

void* ipc_allocate(const DeviceRuntime& runtime, int device, size_t bytes) {
  auto args = client_args<TPD_Ipc_Allocate_Args>(TPD_Ipc_Allocate_Args_STRUCT_SIZE, runtime.client());
  args.device = device;
  args.size = bytes;
  runtime.library().check(extension(runtime).ipc_allocate(&args));
  return args.pointer;
}

IpcHandle ipc_get_handle(const DeviceRuntime& runtime, void* pointer) {
  auto args = client_args<TPD_Ipc_GetHandle_Args>(TPD_Ipc_GetHandle_Args_STRUCT_SIZE, runtime.client());
  args.pointer = pointer;
  runtime.library().check(extension(runtime).ipc_get_handle(&args));
  IpcHandle handle;
  std::copy(std::begin(args.handle), std::end(args.handle), handle.begin());
  return handle;
}

IpcMapping ipc_open(const DeviceRuntime& runtime, int device, const IpcHandle& handle) {
  auto args = client_args<TPD_Ipc_Open_Args>(TPD_Ipc_Open_Args_STRUCT_SIZE, runtime.client());
  args.device = device;
  args.handle = handle.data();
  runtime.library().check(extension(runtime).ipc_open(&args));
  return {args.pointer, args.size};
}

void ipc_close(const DeviceRuntime& runtime, void* pointer) {
  auto args = client_args<TPD_Ipc_Close_Args>(TPD_Ipc_Close_Args_STRUCT_SIZE, runtime.client());
  args.pointer = pointer;
  runtime.library().check(extension(runtime).ipc_close(&args));
}

}  // namespace torchplug::driver
