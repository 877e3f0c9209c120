// The profiler extension (device timestamps) and the simulator's own controls.
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"
#include "runtime/errors.h"
#include "runtime/memory_guard.h"

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
    case TPD_SIMULATOR_FAIL_KERNEL_LAUNCHES:
      client->platform().inject_launch_failures(args.device, args.count);
      return;
  }
  throw Error(TPD_INVALID_ARGUMENT, "TPD_Simulator_InjectFault_Args.fault is " + std::to_string(fault) +
                                        ", not a TPD_SimulatorFault; pass TPD_SIMULATOR_FAIL_ALLOCATIONS, "
                                        "TPD_SIMULATOR_FAIL_KERNELS or TPD_SIMULATOR_FAIL_KERNEL_LAUNCHES.");
}

void controls::take_kernel_fault(TPD_Simulator_TakeKernelFault_Args& args) {
  args.taken = find_client(args.client, args.device)->platform().take_launch_failure(args.device) ? 1 : 0;
}

void controls::strict_memory(TPD_Simulator_StrictMemory_Args& args) {
  find_client(args.client);
  if (args.enable != -1 && args.enable != 0 && args.enable != 1) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Simulator_StrictMemory_Args.enable is " + std::to_string(args.enable) +
                                          "; pass 1 (on), 0 (off) or -1 (leave it).");
  }
  if (args.enable != -1) {
    runtime::set_strict_mode(args.enable == 1);
  }
  args.enabled = runtime::strict_mode() ? 1 : 0;
}

namespace {

// The open access windows: a window handle is looked up before it is closed.
std::mutex windows_mutex;
auto* windows = new std::set<const void*>();  // leaked: windows may close while the process exits

}  // namespace

void controls::open_access(TPD_Simulator_Access_Args& args) {
  find_client(args.client);
  if (args.pointers == nullptr && args.pointer_count > 0) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Simulator_Access_Args.pointers is NULL but pointer_count is " +
                                          std::to_string(args.pointer_count) + "; pass the pointers to open.");
  }
  auto* window = new runtime::KernelAccess(args.pointers, args.pointer_count);
  std::lock_guard<std::mutex> lock(windows_mutex);
  windows->insert(window);
  args.window = window;
}

void controls::close_access(TPD_Simulator_Access_Args& args) {
  find_client(args.client);
  {
    std::lock_guard<std::mutex> lock(windows_mutex);
    if (windows->erase(args.window) == 0) {
      throw Error(TPD_INVALID_HANDLE, "close_access: the window is not one open_access returned, or was closed "
                                      "already; close each window once.");
    }
  }
  delete static_cast<runtime::KernelAccess*>(args.window);
}

void controls::adopt(TPD_Simulator_Adopt_Args& args) {
  auto client = find_client(args.client, args.device);
  if (args.release != 0 && args.release != 1) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Simulator_Adopt_Args.release is " + std::to_string(args.release) +
                                          "; pass 0 (adopt) or 1 (release).");
  }
  if (args.release == 1) {
    client->platform().release_adopted(args.device, args.bytes);
  } else {
    client->platform().adopt(args.device, args.bytes);
  }
}

void controls::stats(TPD_Simulator_Stats_Args& args) {
  auto client = find_client(args.client, args.device);
  runtime::Platform& platform = client->platform();
  const runtime::DeviceMemoryStats stats = platform.stats(args.device);
  args.initialized = platform.initialized() ? 1 : 0;
  args.used_bytes = stats.used_bytes;
  args.peak_used_bytes = stats.peak_used_bytes;
  args.allocation_count = stats.allocation_count;
  args.free_count = stats.free_count;
  args.failed_allocations = stats.failed_allocations;
  if (args.reset_peak != 0) {
    platform.reset_peak(args.device);
  }
}

void controls::sleep(TPD_Simulator_Sleep_Args& args) {
  auto stream = find_client(args.client)->stream(args.stream);
  if (!(args.milliseconds >= 0)) {
    throw Error(TPD_INVALID_ARGUMENT, "Cannot sleep " + std::to_string(args.milliseconds) +
                                          " ms on a stream; pass 0 or more.");
  }
  stream->enqueue([milliseconds = args.milliseconds] {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(milliseconds));
  });
}

}  // namespace torchplug::simulator
