#include "stream_order.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_vnpu {

void wait_for_current_stream(c10::Device device) {
  if (device.is_cpu()) {
    return;
  }
  const c10::impl::DeviceGuardImplInterface* guard = c10::impl::getDeviceGuardImpl(device.type());
  const c10::Stream stream = guard->getStream(device);
  if (!guard->queryStream(stream)) {
    guard->synchronizeStream(stream);
  }
}

}  // namespace torch_vnpu
