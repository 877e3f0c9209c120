#include "launch/device_function.h"

#include <c10/core/DeviceGuard.h>

#include "backend/backend.h"
#include "driver/stream.h"
#include "launch/kernel_launch.h"

namespace torchplug {

void launch_device_function(c10::Device device, TPD_Function* function, const TPD_KernelArg* args, size_t count) {
  const c10::DeviceGuard guard(device);
  translate_runtime_errors([&] {
    const driver::Stream& stream = runtime_stream(current_stream(device));
    stream.launch_kernel(function, args, count);
    if (launch_blocking()) {
      stream.synchronize();
    }
  });
}

}  // namespace torchplug
