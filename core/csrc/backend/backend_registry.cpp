#include "backend/backend.h"

#include "driver/memory_access.h"

#include <array>
#include <stdexcept>

#include <ATen/autocast_mode.h>

#include "kernels/attention.h"
#include "registration/autocast.h"
#include "kernels/cpu_stub_slots.h"
#include "memory/device_allocator.h"
#include "device/device_guard.h"
#include "device/graph.h"
#include "device/hooks.h"
#include "memory/host_allocator.h"
#include "registration/kernels.h"
#include "profiler/kineto_profiler.h"
#include "profiler/profiler_stubs.h"
#include "memory/shallow_copy.h"
#include "backend/device_types.h"

namespace torchplug {
namespace {

void register_privateuse1_specifics() {
  register_privateuse1_profiler();
  register_privateuse1_profiler_stubs();
  register_shallow_copy_compatibility();
  register_privateuse1_attention();
  serve_privateuse1_stubs_from_cpu();
}

// Every difference between a PrivateUse1 and an HPU backend.
const std::array<DeviceKind, 2> kDeviceKinds{{
    {c10::DeviceType::PrivateUse1, "privateuse1", &register_privateuse1_hooks,
     "PrivateUse1 hooks were already registered by another library (a backend not built on torchplug); only one "
     "PrivateUse1 backend can be active per process.",
     &register_autocast_policies<c10::DeviceType::PrivateUse1>, &register_privateuse1_specifics,
     /*iterator_sees_data=*/true},
    {c10::DeviceType::HPU, "hpu", &register_hpu_hooks,
     "HPU hooks were already registered by another library (e.g. a real habana_frameworks); only one HPU "
     "integration can be active per process.",
     &register_autocast_policies<c10::DeviceType::HPU>, &register_hpu_attention, /*iterator_sees_data=*/false},
}};

const DeviceKind& device_kind(const std::string& key_name) {
  for (const DeviceKind& kind : kDeviceKinds) {
    if (key_name == kind.key_name) {
      return kind;
    }
  }
  throw std::invalid_argument("Unsupported dispatch key '" + key_name + "': use 'privateuse1' or 'hpu'.");
}

constexpr size_t kMaxDevices = driver::kMaxDevices;

// Written once per device type, at registration; never freed (kernels may
// run during exit).
PerDeviceType<const BackendIdentity*> backends{};
thread_local PerDeviceType<std::array<c10::StreamId, kMaxDevices>> current_stream_ids{};
// Resolved device streams for current_stream_ids, so the per-kernel stream
// check is a load and, on an idle stream, two atomic loads (driver::Stream::query).
thread_local PerDeviceType<std::array<driver::Stream*, kMaxDevices>> current_streams{};

const BackendIdentity* make_identity(const DeviceKind& kind, driver::DeviceRuntime& runtime) {
  const c10::Device device(kind.type);
  const c10::DispatchKey key = c10::computeDispatchKey(std::nullopt, std::nullopt, device);
  return new BackendIdentity{runtime.name(),
                             &kind,
                             kind.type,
                             key,
                             c10::getAutogradKeyFromBackend(c10::toBackendComponent(key)),
                             c10::computeDispatchKey(std::nullopt, c10::kSparse, device),
                             c10::computeDispatchKey(std::nullopt, c10::kSparseCsr, device),
                             at::autocast::get_autocast_dispatch_key_from_device_type(kind.type),
                             c10::DispatchKeySet(key),
                             &runtime,
                             translate_runtime_errors([&] {
                               return runtime.has_capability(TPD_CAPABILITY_HOST_ADDRESSABLE_MEMORY);
                             })};
}

}  // namespace

driver::DeviceRuntime& open_backend_driver(const std::string& name, const std::string& path,
                                           const std::string& options) {
  driver::DeviceRuntime& runtime = translate_runtime_errors(
      [&]() -> driver::DeviceRuntime& { return driver::DeviceRuntime::open(name, path, options); });
  driver::strict_memory_runtime_opened(runtime);
  return runtime;
}

const BackendIdentity& register_backend(const std::string& key_name, const std::string& name) {
  const DeviceKind& kind = device_kind(key_name);
  driver::DeviceRuntime* opened = driver::DeviceRuntime::find(name);
  driver::DeviceRuntime& runtime = opened != nullptr ? *opened : open_backend_driver(name, "");
  const BackendIdentity*& slot = backends[static_cast<size_t>(kind.type)];
  if (slot != nullptr && slot->runtime != &runtime) {
    throw std::runtime_error("Device type " + key_name + " is already served by '" + slot->name + "'.");
  }
  if (!kind.register_hooks()) {
    throw std::runtime_error(kind.hooks_taken);
  }
  if (slot == nullptr) {
    slot = make_identity(kind, runtime);
  }
  const BackendIdentity& identity = *slot;
  device_allocator(identity.type);
  register_host_allocator(identity.type);
  register_device_guard(identity.type);
  register_graph(identity.type);
  register_kernels(identity);
  if (kind.register_type_specific != nullptr) {
    kind.register_type_specific();
  }
  return identity;
}

const BackendIdentity* find_backend(c10::DeviceType type) { return backends[static_cast<size_t>(type)]; }

std::vector<std::string> registered_backend_names() {
  std::vector<std::string> names;
  for (const BackendIdentity* identity : backends) {
    if (identity != nullptr) {
      names.push_back(identity->name);
    }
  }
  return names;
}

const BackendIdentity& backend(c10::DeviceType type) {
  const BackendIdentity* found = find_backend(type);
  TORCH_CHECK(found != nullptr, "No torchplug backend is registered for device type ",
              c10::DeviceTypeName(type, /*lower_case=*/true),
              ". Install the backend's package, or check `torchplug doctor` for why it is inactive.");
  return *found;
}

namespace {

const BackendIdentity* find_backend_named(const std::string& name) {
  for (const BackendIdentity* identity : backends) {
    if (identity != nullptr && (name == identity->name || name == identity->kind->key_name)) {
      return identity;
    }
  }
  return nullptr;
}

}  // namespace

const BackendIdentity& backend(const std::string& name) {
  const BackendIdentity* found = find_backend_named(name);
  TORCH_CHECK(found != nullptr, "No torchplug backend is registered as '", name,
              "'. Install the backend's package, or check `torchplug doctor` for why it is inactive.");
  return *found;
}

driver::DeviceRuntime& device_runtime_named(const std::string& name) {
  const BackendIdentity* found = find_backend_named(name);
  if (found != nullptr) {
    return *found->runtime;
  }
  driver::DeviceRuntime* opened = driver::DeviceRuntime::find(name);
  return opened != nullptr ? *opened : open_backend_driver(name, "");
}

c10::DeviceIndex checked_device_index(c10::DeviceType type, c10::DeviceIndex index) {
  driver::DeviceRuntime& runtime = device_runtime(type);
  if (index < 0) {
    return static_cast<c10::DeviceIndex>(runtime.current_device());
  }
  if (index >= runtime.device_count()) {
    translate_runtime_errors([&] { runtime.check_device(index); });
  }
  return index;
}

c10::Stream current_stream(c10::Device device) {
  const c10::DeviceIndex index = checked_device_index(device.type(), device.index());
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(device.type(), index),
                     current_stream_ids[static_cast<size_t>(device.type())][index]);
}

void set_current_stream(c10::Stream stream) {
  const c10::DeviceIndex index = checked_device_index(stream.device_type(), stream.device_index());
  const auto type_slot = static_cast<size_t>(stream.device_type());
  if (current_stream_ids[type_slot][index] == stream.id() && current_streams[type_slot][index] != nullptr &&
      !backends[type_slot]->runtime->in_bad_fork()) {
    return;  // autograd sets the current stream around every backward node
  }
  driver::Stream& resolved =
      runtime_stream(c10::Stream(c10::Stream::UNSAFE, c10::Device(stream.device_type(), index), stream.id()));
  current_stream_ids[type_slot][index] = stream.id();
  current_streams[type_slot][index] = &resolved;
}

driver::Stream& runtime_stream(c10::Stream stream) {
  return translate_runtime_errors([&]() -> driver::Stream& {
    return device_runtime(stream.device_type()).stream(stream.device_index(), stream.id());
  });
}

bool wait_for_current_stream(c10::Device device) {
  const auto type_slot = static_cast<size_t>(device.type());
  driver::Stream*& stream = current_streams[type_slot][device.index()];
  driver::DeviceRuntime& runtime = *backends[type_slot]->runtime;
  if (stream == nullptr || runtime.in_bad_fork()) {
    stream = translate_runtime_errors([&] {
      runtime.check_usable();
      return &runtime.default_stream(device.index());
    });
  }
  return translate_runtime_errors([&] {
    if (stream->query()) {
      return false;
    }
    stream->synchronize();
    return true;
  });
}

void raise_pending_kernel_errors(c10::Device device) {
  driver::DeviceRuntime& runtime = *backends[static_cast<size_t>(device.type())]->runtime;
  translate_runtime_errors([&] {
    for (driver::Stream* stream : runtime.streams(device.index())) {
      if (stream->has_error()) {
        stream->synchronize();
      }
    }
  });
}

}  // namespace torchplug
