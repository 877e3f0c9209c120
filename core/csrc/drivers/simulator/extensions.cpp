// The profiler extension (device timestamps) and the simulator's own controls.
#include <chrono>
#include <string>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"
#include "runtime/errors.h"

namespace torchplug::simulator {

void profiler::event_timestamp(TPD_Profiler_EventTimestamp_Args& args) {
  const auto time = find_client(args.client)->event(args.event)->completion_time("profiled");
  // The runtime stamps events with std::chrono::steady_clock, the host profiler's clock.
  args.nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

void controls::configure(TPD_Simulator_Configure_Args& args) {
  runtime::Platform& platform = find_client(args.client)->platform();
  if (args.device_count < 1 || args.device_count > runtime::Platform::kMaxDevices) {
    throw Error(TPD_INVALID_ARGUMENT, "A simulated device count of " + std::to_string(args.device_count) +
                                          " is not possible; pass one from 1 to " +
                                          std::to_string(runtime::Platform::kMaxDevices) + ".");
  }
  if (args.capacity_bytes == 0) {
    throw Error(TPD_INVALID_ARGUMENT, "A device capacity of 0 bytes is not possible; pass a positive size.");
  }
  try {
    platform.configure(args.device_count, args.capacity_bytes);
  } catch (const runtime::RuntimeError&) {  // what remains after the checks above: the devices are in use
    throw Error(TPD_INVALID_ARGUMENT, "The '" + platform.name() +
                                          "' devices are in use already (memory was allocated or a stream "
                                          "created), so their count and capacity are fixed; configure them "
                                          "before the first allocation or stream of any '" + platform.name() +
                                          "' client.");
  }
}

void controls::inject_fault(TPD_Simulator_InjectFault_Args& args) {
  auto client = find_client(args.client, args.device);
  if (args.count < 0) {
    throw Error(TPD_INVALID_ARGUMENT, "Cannot inject " + std::to_string(args.count) +
                                          " faults; pass a count of 0 (none) or more.");
  }
  const int fault = enum_value(args.fault);
  switch (fault) {
    case TPD_SIMULATOR_FAIL_ALLOCATIONS:
      client->platform().inject_allocation_failures(args.device, args.count);
      return;
    case TPD_SIMULATOR_FAIL_KERNELS:
      client->platform().inject_kernel_failures(args.device, args.count);
      return;
  }
  throw Error(TPD_INVALID_ARGUMENT, "TPD_Simulator_InjectFault_Args.fault is " + std::to_string(fault) +
                                        ", not a TPD_SimulatorFault; pass TPD_SIMULATOR_FAIL_ALLOCATIONS or "
                                        "TPD_SIMULATOR_FAIL_KERNELS.");
}

}  // namespace torchplug::simulator
