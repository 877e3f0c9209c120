// Clients and their devices.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"
#include "runtime/errors.h"

namespace torchplug::simulator {
namespace {

// Device memory is host memory, a copy between devices is a memcpy, and
// events carry completion times. Priorities hold trivially: every stream has
// a worker thread of its own, so no stream's work waits behind another's.
constexpr uint64_t kCapabilities = TPD_CAPABILITY_HOST_ADDRESSABLE_MEMORY | TPD_CAPABILITY_PEER_COPY |
                                   TPD_CAPABILITY_TIMING_EVENTS | TPD_CAPABILITY_STREAM_PRIORITIES;

// The one client option, "hidden_capabilities=<bits>"; anything else is refused.
uint64_t hidden_capabilities(const char* options) {
  if (options == nullptr || options[0] == '\0') {
    return 0;
  }
  const std::string text(options);
  const std::string key = "hidden_capabilities=";
  if (text.compare(0, key.size(), key) == 0 && text.size() > key.size() &&
      text.find_first_not_of("0123456789", key.size()) == std::string::npos) {
    return std::stoull(text.substr(key.size()));
  }
  throw Error(TPD_INVALID_ARGUMENT, "The simulator takes one client option, \"hidden_capabilities=<bits>\", but got \"" +
                                        text + "\"; pass NULL, and set the device count and memory with the "
                                        "simulator extension's configure.");
}

}  // namespace

void client_create(TPD_Client_Create_Args& args) {
  if (args.name == nullptr || args.name[0] == '\0') {
    throw Error(TPD_INVALID_ARGUMENT,
                "TPD_Client_Create_Args.name is NULL or empty; pass the backend's device name (\"npu\").");
  }
  const uint64_t hidden = hidden_capabilities(args.options);
  runtime::Platform* platform = nullptr;
  try {
    platform = &runtime::Platform::get(args.name);
  } catch (const runtime::RuntimeError& error) {  // every platform slot is taken
    throw Error(TPD_UNAVAILABLE, std::string(error.what()) + " Create clients with a device name already in use.");
  }
  check_usable(*platform);
  auto client = std::make_shared<Client>(*platform);
  client->hide_capabilities(hidden);
  args.client = register_client(std::move(client));
}

void client_destroy(TPD_Client_Destroy_Args& args) {
  if (host_function_stream != nullptr && live_client(args.client)->owns_stream(host_function_stream)) {
    throw Error(TPD_INVALID_ARGUMENT,
                "client_destroy was called from a host function running on one of the client's streams, and "
                "would wait for that function forever; destroy the client from another thread.");
  }
  std::shared_ptr<Client> client = unregister_client(args.client);
  if (client->platform().in_bad_fork()) {
    // Waiting for or joining the streams' worker threads, which did not
    // survive the fork, would hang: the client's objects are left allocated.
    static_cast<void>(new std::shared_ptr<Client>(std::move(client)));
    return;
  }
  client->release();
}

void client_device_count(TPD_Client_DeviceCount_Args& args) {
  args.device_count = find_client(args.client)->platform().device_count();
}

void device_get_properties(TPD_Device_GetProperties_Args& args) {
  auto client = find_client(args.client, args.device);
  TPD_DeviceProperties& properties = TPD_CHECKED_ARGS(TPD_DeviceProperties, args.properties);
  runtime::Platform& platform = client->platform();
  std::snprintf(properties.name, sizeof properties.name, "torchplug simulator %s:%d", platform.name().c_str(),
                args.device);
  properties.total_memory = platform.capacity(args.device);
  properties.capabilities = kCapabilities & ~client->hidden_capabilities();
  properties.stream_priority_greatest = kStreamPriorityGreatest;
  properties.stream_priority_least = 0;
  properties.memory_alignment = runtime::Platform::kMemoryAlignment;
}

}  // namespace torchplug::simulator
