// The profiler extension (device timestamps) and the simulator's own controls.
#include <chrono>
#include <string>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"
#include "runtime/errors.h"

namespace torchplug::simulator {

TPD_Error* profiler_event_timestamp(TPD_Profiler_EventTimestamp_Args* args) {
  return guarded("event_timestamp", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Profiler_EventTimestamp_Args, args);
    const auto time = find_client(checked.client)->event(checked.event)->completion_time("profiled");
    // The runtime stamps events with std::chrono::steady_clock, the host profiler's clock.
    checked.nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
  });
}

TPD_Error* simulator_configure(TPD_Simulator_Configure_Args* args) {
  return guarded("configure", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Simulator_Configure_Args, args);
    runtime::Platform& platform = find_client(checked.client)->platform();
    if (checked.device_count < 1 || checked.device_count > runtime::Platform::kMaxDevices) {
      throw Error(TPD_INVALID_ARGUMENT, "A simulated device count of " + std::to_string(checked.device_count) +
                                            " is not possible; pass one from 1 to " +
                                            std::to_string(runtime::Platform::kMaxDevices) + ".");
    }
    if (checked.capacity_bytes == 0) {
      throw Error(TPD_INVALID_ARGUMENT, "A device capacity of 0 bytes is not possible; pass a positive size.");
    }
    try {
      platform.configure(checked.device_count, checked.capacity_bytes);
    } catch (const runtime::RuntimeError&) {  // what remains after the checks above: the devices are in use
      throw Error(TPD_INVALID_ARGUMENT, "The '" + platform.name() +
                                            "' devices are in use already (memory was allocated or a stream "
                                            "created), so their count and capacity are fixed; configure them "
                                            "before the first allocation or stream of any '" + platform.name() +
                                            "' client.");
    }
  });
}

TPD_Error* simulator_inject_fault(TPD_Simulator_InjectFault_Args* args) {
  return guarded("inject_fault", [&] {
    auto& checked = TPD_CHECKED_ARGS(TPD_Simulator_InjectFault_Args, args);
    auto client = find_client(checked.client);
    client->check_device(checked.device);
    if (checked.count < 0) {
      throw Error(TPD_INVALID_ARGUMENT, "Cannot inject " + std::to_string(checked.count) +
                                            " faults; pass a count of 0 (none) or more.");
    }
    const int fault = enum_value(checked.fault);
    switch (fault) {
      case TPD_SIMULATOR_FAIL_ALLOCATIONS:
        client->platform().inject_allocation_failures(checked.device, checked.count);
        return;
      case TPD_SIMULATOR_FAIL_KERNELS:
        client->platform().inject_kernel_failures(checked.device, checked.count);
        return;
    }
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Simulator_InjectFault_Args.fault is " + std::to_string(fault) +
                                          ", not a TPD_SimulatorFault; pass TPD_SIMULATOR_FAIL_ALLOCATIONS or "
                                          "TPD_SIMULATOR_FAIL_KERNELS.");
  });
}

}  // namespace torchplug::simulator
