#pragma once
// The bodies of the simulator's TPD_Api table and extensions: the interface's
// lists (drivers/common/tables.h), and the simulator's own extension. api.cpp
// fills the tables from them. The bodies are in the file of their concern:
// errors.cpp (error_get_code), clients.cpp (client_*, device_get_properties),
// memory.cpp (memory_*, host_memory_*, ipc::ipc_allocate), streams.cpp
// (stream_*), events.cpp (event_*), ipc.cpp (ipc::), modules.cpp (modules::),
// graphs.cpp (graphs::), extensions.cpp (profiler:: and controls::).
#include "drivers/common/errors.h"
#include "drivers/common/tables.h"
#include "torchplug/driver.h"

// TPD_SimulatorExtension's functions, in namespace controls.
#define TPD_SIMULATOR_CONTROL_FUNCTIONS(X)                    \
  X(configure, TPD_Simulator_Configure_Args)                  \
  X(inject_fault, TPD_Simulator_InjectFault_Args)             \
  X(take_kernel_fault, TPD_Simulator_TakeKernelFault_Args)    \
  X(strict_memory, TPD_Simulator_StrictMemory_Args)           \
  X(open_access, TPD_Simulator_Access_Args)                   \
  X(close_access, TPD_Simulator_Access_Args)                  \
  X(adopt, TPD_Simulator_Adopt_Args)                          \
  X(stats, TPD_Simulator_Stats_Args)                          \
  X(sleep, TPD_Simulator_Sleep_Args)

namespace torchplug::simulator {

// The two functions that return no error, so report none (drivers/common/errors.h);
// they take their arguments unchecked and are in the table as they are.
using drivers::error_destroy;
using drivers::error_message;

TPD_API_FUNCTIONS(TPD_DRIVER_DECLARE_BODY)

// The extensions' functions have namespaces of their own: their member names
// are short, and would read as the table's own in this one.
namespace ipc {
TPD_IPC_FUNCTIONS(TPD_DRIVER_DECLARE_BODY)
}  // namespace ipc

namespace profiler {
TPD_PROFILER_FUNCTIONS(TPD_DRIVER_DECLARE_BODY)
}  // namespace profiler

namespace modules {
TPD_KERNEL_MODULE_FUNCTIONS(TPD_DRIVER_DECLARE_BODY)
}  // namespace modules

namespace graphs {
TPD_GRAPH_CAPTURE_FUNCTIONS(TPD_DRIVER_DECLARE_BODY)
}  // namespace graphs

namespace controls {
TPD_SIMULATOR_CONTROL_FUNCTIONS(TPD_DRIVER_DECLARE_BODY)
}  // namespace controls

}  // namespace torchplug::simulator
