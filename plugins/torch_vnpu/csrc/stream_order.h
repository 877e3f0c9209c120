#pragma once
// The npu kernels execute on the host, synchronously. To keep the order of
// the current stream they first wait for the work already queued on it
// (asynchronous copies, event waits), as the core's own host kernels do.
#include <c10/core/Device.h>

namespace torch_vnpu {

// A no-op for CPU tensors. Goes through the device guard torchplug registered
// for the device type, the public c10 interface: the plugin does not link
// the core's native library.
void wait_for_current_stream(c10::Device device);

}  // namespace torch_vnpu
