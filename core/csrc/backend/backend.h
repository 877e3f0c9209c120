#pragma once
// What the torch integration knows about each registered simulated backend:
// one identity record per backend (its device name, device type, dispatch
// keys and the device runtime, over its driver, that is its index space), looked up once by
// every _C entry and kernel. Everything else in this layer is generic over
// the device type, so one build serves PrivateUse1 (renamed to "foo", "npu",
// ...) and the in-tree HPU key alike; where the two differ is one table,
// DeviceKind, in backend_registry.cpp.
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/Stream.h>

#include "driver/device_runtime.h"

namespace torch {
class Library;
}  // namespace torch

namespace torchplug {

// What differs between the device types a backend can take: PrivateUse1
// (renamed per backend) and the in-tree HPU key. One row per type.
struct DeviceKind {
  c10::DeviceType type;
  // The name Python's Backend.dispatch_key gives it.
  const char* key_name;
  // Installs the accelerator hooks torch reaches the device through; false
  // when another library installed them first (`hooks_taken` says so).
  bool (*register_hooks)();
  const char* hooks_taken;
  // torch.autocast's per-operator policies (compile-time per device type).
  void (*register_autocast_policies)(torch::Library& library);
  // What only this type needs: for PrivateUse1 the registries torch offers
  // it alone (Kineto and the legacy profiler, shallow-copy compatibility, the
  // fused-attention choice), for HPU the fused-attention choice as a kernel.
  void (*register_type_specific)();
  // TensorIterator hands out the data pointers of this type's operands (it
  // leaves HPU's unset, as for lazy devices), so binary operators may loop
  // over device memory directly.
  bool iterator_sees_data;
};

// One backend's identity, fixed when it registers.
struct BackendIdentity {
  std::string name;  // the device name users write: "foo", "npu", "hpu"
  const DeviceKind* kind;
  c10::DeviceType type;
  c10::DispatchKey key;             // dense kernels (PrivateUse1, HPU)
  c10::DispatchKey autograd_key;    // AutogradPrivateUse1, AutogradHPU
  c10::DispatchKey sparse_key;      // COO tensors
  c10::DispatchKey sparse_csr_key;  // compressed sparse layouts
  c10::DispatchKey autocast_key;
  c10::DispatchKeySet dense_keys;   // what a dense device tensor carries
  driver::DeviceRuntime* runtime;   // the index space: devices, memory, streams (over the driver)
  // The host may read and write device memory (TPD_CAPABILITY_HOST_ADDRESSABLE_MEMORY):
  // CPU kernels run over it in place. Otherwise (a discrete device) every
  // byte crosses through the driver's copies.
  bool host_addressable;
};

// Binds the device runtime `name` (opened with open_backend_driver, else on
// the simulator) to the device type whose dispatch key Python calls
// `key_name` ("privateuse1", "hpu") and installs every registration torch
// needs for it. Idempotent.
const BackendIdentity& register_backend(const std::string& key_name, const std::string& name);

// Opens backend `name`'s driver (the simulator for an empty `path`); throws a
// message naming the driver and what failed. Idempotent.
driver::DeviceRuntime& open_backend_driver(const std::string& name, const std::string& path,
                                           const std::string& options = "");

// The backend `name` addresses, by its device name ("foo") or its dispatch
// key ("privateuse1", "hpu"); raises a clear error when none is registered.
const BackendIdentity& backend(const std::string& name);
// The backend serving `type`; raises a clear error if none is registered.
const BackendIdentity& backend(c10::DeviceType type);
// Null when `type` is not served by torchplug.
const BackendIdentity* find_backend(c10::DeviceType type);
// The device names of the backends registered so far.
std::vector<std::string> registered_backend_names();
// The device runtime `name` addresses: a registered backend's, else the one
// opened under that name (configured before its backend registers), else the
// simulator's, opened now.
driver::DeviceRuntime& device_runtime_named(const std::string& name);

// The runtime backing `type`; raises a clear error if none is registered.
inline driver::DeviceRuntime& device_runtime(c10::DeviceType type) { return *backend(type).runtime; }
// Null when `type` is not served by torchplug.
inline driver::DeviceRuntime* find_device_runtime(c10::DeviceType type) {
  const BackendIdentity* found = find_backend(type);
  return found == nullptr ? nullptr : found->runtime;
}

// Validates `index` (-1 means the current device) and returns a real index.
c10::DeviceIndex checked_device_index(c10::DeviceType type, c10::DeviceIndex index);

// The stream work is issued to on `device` by the calling thread.
c10::Stream current_stream(c10::Device device);
void set_current_stream(c10::Stream stream);
driver::Stream& runtime_stream(c10::Stream stream);

// Host-executed kernels run "on" the current stream: wait for work queued
// there (async copies, event waits) so stream order holds. True when there
// was work to wait for.
bool wait_for_current_stream(c10::Device device);

// Raises the error a queued kernel raised on any stream of `device`, if one
// is pending (what a host read of a result reports).
void raise_pending_kernel_errors(c10::Device device);

// Runs `body`, turning runtime errors into the torch exceptions users expect.
template <typename Body>
decltype(auto) translate_runtime_errors(Body&& body);

}  // namespace torchplug

#include "backend/backend_inl.h"
