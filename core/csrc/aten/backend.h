#pragma once
// What the torch integration knows about each registered simulated backend:
// which device type it serves and which runtime platform backs it. Everything
// in this layer is generic over the device type, so one build serves
// PrivateUse1 (renamed to "foo", "npu", ...) and the in-tree HPU key alike.
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/Stream.h>

#include "runtime/platform.h"

namespace torchplug {

// The platform backing `type`; raises a clear error if none is registered.
runtime::Platform& platform_for(c10::DeviceType type);
// Null when `type` is not served by torchplug.
runtime::Platform* find_platform(c10::DeviceType type);
void bind_platform(c10::DeviceType type, runtime::Platform& platform);

// Validates `index` (-1 means the current device) and returns a real index.
c10::DeviceIndex checked_device_index(c10::DeviceType type, c10::DeviceIndex index);

// The stream work is issued to on `device` by the calling thread.
c10::Stream current_stream(c10::Device device);
void set_current_stream(c10::Stream stream);
runtime::Stream& runtime_stream(c10::Stream stream);

// Host-executed kernels run "on" the current stream: wait for work queued
// there (async copies, event waits) so stream order holds.
void wait_for_current_stream(c10::Device device);

// Runs `body`, turning runtime errors into the torch exceptions users expect.
template <typename Body>
decltype(auto) translate_runtime_errors(Body&& body);

}  // namespace torchplug

#include "aten/backend_inl.h"
