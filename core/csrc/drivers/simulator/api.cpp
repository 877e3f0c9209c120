// The simulator's function table and its entry point, TPD_GetApi: the one
// symbol the library exports.
#include "drivers/simulator/entry_points.h"
#include "torchplug/driver.h"

#ifndef TORCHPLUG_SIMULATOR_VERSION
#error "TORCHPLUG_SIMULATOR_VERSION (the driver's release) must be defined by the build"
#endif

namespace torchplug::simulator {
namespace {

// The tables are filled member by member: several members share a type
// (stream_query, stream_synchronize), which positional initialisation could
// swap unnoticed.
TPD_SimulatorExtension make_simulator_extension() {
  TPD_SimulatorExtension extension{};
  extension.struct_size = TPD_SimulatorExtension_STRUCT_SIZE;
  extension.type = TPD_EXTENSION_SIMULATOR;
  extension.next = nullptr;
  extension.configure = simulator_configure;
  extension.inject_fault = simulator_inject_fault;
  return extension;
}

const TPD_SimulatorExtension simulator_extension = make_simulator_extension();

TPD_ProfilerExtension make_profiler_extension() {
  TPD_ProfilerExtension extension{};
  extension.struct_size = TPD_ProfilerExtension_STRUCT_SIZE;
  extension.type = TPD_EXTENSION_PROFILER;
  extension.next = reinterpret_cast<const TPD_ExtensionBase*>(&simulator_extension);
  extension.event_timestamp = profiler_event_timestamp;
  return extension;
}

const TPD_ProfilerExtension profiler_extension = make_profiler_extension();

TPD_Api make_api() {
  TPD_Api api{};
  api.struct_size = TPD_Api_STRUCT_SIZE;
  api.extension_start = reinterpret_cast<const TPD_ExtensionBase*>(&profiler_extension);
  api.api_version.major = TPD_API_MAJOR;
  api.api_version.minor = TPD_API_MINOR;
  api.driver_name = "torchplug simulator";
  api.driver_version = TORCHPLUG_SIMULATOR_VERSION;

  api.error_destroy = error_destroy;
  api.error_message = error_message;
  api.error_get_code = error_get_code;

  api.client_create = client_create;
  api.client_destroy = client_destroy;
  api.client_device_count = client_device_count;
  api.device_get_properties = device_get_properties;

  api.memory_allocate = memory_allocate;
  api.memory_free = memory_free;
  api.memory_get_info = memory_get_info;
  api.host_memory_allocate = host_memory_allocate;
  api.host_memory_free = host_memory_free;
  api.memory_set_async = memory_set_async;
  api.memory_copy_async = memory_copy_async;

  api.stream_create = stream_create;
  api.stream_destroy = stream_destroy;
  api.stream_query = stream_query;
  api.stream_synchronize = stream_synchronize;
  api.stream_wait_event = stream_wait_event;
  api.stream_launch_host_function = stream_launch_host_function;

  api.event_create = event_create;
  api.event_destroy = event_destroy;
  api.event_record = event_record;
  api.event_query = event_query;
  api.event_synchronize = event_synchronize;
  api.event_elapsed_time = event_elapsed_time;
  return api;
}

const TPD_Api api = make_api();

}  // namespace
}  // namespace torchplug::simulator

extern "C" __attribute__((visibility("default"))) const TPD_Api* TPD_GetApi(void) {
  return &torchplug::simulator::api;
}
