#include "driver/ipc.h"

#include <algorithm>
#include <iterator>
#include <string>

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
  const auto args = TPD_CALL(runtime.library(), extension(runtime), ipc_allocate, TPD_Ipc_Allocate_Args,
                             args_.client = runtime.client(), args_.device = device, args_.size = bytes);
  return args.pointer;
}

IpcHandle ipc_get_handle(const DeviceRuntime& runtime, void* pointer) {
  const auto args = TPD_CALL(runtime.library(), extension(runtime), ipc_get_handle, TPD_Ipc_GetHandle_Args,
                             args_.client = runtime.client(), args_.pointer = pointer);
  IpcHandle handle;
  std::copy(std::begin(args.handle), std::end(args.handle), handle.begin());
  return handle;
}

IpcMapping ipc_open(const DeviceRuntime& runtime, int device, const IpcHandle& handle) {
  const auto args = TPD_CALL(runtime.library(), extension(runtime), ipc_open, TPD_Ipc_Open_Args,
                             args_.client = runtime.client(), args_.device = device,
                             args_.handle = handle.data());
  return {args.pointer, args.size};
}

void ipc_close(const DeviceRuntime& runtime, void* pointer) {
  TPD_CALL(runtime.library(), extension(runtime), ipc_close, TPD_Ipc_Close_Args, args_.client = runtime.client(),
           args_.pointer = pointer);
}

}  // namespace torchplug::driver
