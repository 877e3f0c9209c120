#pragma once
// The functions of the simulator's TPD_Api table and extensions. Each list
// names a table's functions once, as X(member, Args); for each, the file named
// defines the body
//
//     void member(Args& args);
//
// and api.cpp puts in the table's `member` the C function that runs it: it
// checks `args` (checked_args: there, and with a struct_size covering this
// header's members), and runs the body inside `guarded`, so that no exception
// crosses the C boundary. No function is left out of its table or without
// these checks, and they are written once.
#include "drivers/common/errors.h"
#include "torchplug/driver.h"

// TPD_Api's functions, by the file that defines them (but error_destroy and
// error_message, below).
#define TPD_SIMULATOR_API_FUNCTIONS(X)                               \
  /* errors.cpp */                                                   \
  X(error_get_code, TPD_Error_GetCode_Args)                          \
  /* clients.cpp */                                                  \
  X(client_create, TPD_Client_Create_Args)                           \
  X(client_destroy, TPD_Client_Destroy_Args)                         \
  X(client_device_count, TPD_Client_DeviceCount_Args)                \
  X(device_get_properties, TPD_Device_GetProperties_Args)            \
  /* memory.cpp */                                                   \
  X(memory_allocate, TPD_Memory_Allocate_Args)                       \
  X(memory_free, TPD_Memory_Free_Args)                               \
  X(memory_get_info, TPD_Memory_GetInfo_Args)                        \
  X(host_memory_allocate, TPD_HostMemory_Allocate_Args)              \
  X(host_memory_free, TPD_HostMemory_Free_Args)                      \
  X(memory_set_async, TPD_Memory_SetAsync_Args)                      \
  X(memory_copy_async, TPD_Memory_CopyAsync_Args)                    \
  /* streams.cpp */                                                  \
  X(stream_create, TPD_Stream_Create_Args)                           \
  X(stream_destroy, TPD_Stream_Destroy_Args)                         \
  X(stream_query, TPD_Stream_Query_Args)                             \
  X(stream_synchronize, TPD_Stream_Query_Args)                       \
  X(stream_wait_event, TPD_Stream_WaitEvent_Args)                    \
  X(stream_launch_host_function, TPD_Stream_LaunchHostFunction_Args) \
  /* events.cpp */                                                   \
  X(event_create, TPD_Event_Create_Args)                             \
  X(event_destroy, TPD_Event_Query_Args)                             \
  X(event_record, TPD_Event_Record_Args)                             \
  X(event_query, TPD_Event_Query_Args)                               \
  X(event_synchronize, TPD_Event_Query_Args)                         \
  X(event_elapsed_time, TPD_Event_ElapsedTime_Args)                  \
  /* streams.cpp */                                                  \
  X(stream_wait_idle, TPD_Stream_Query_Args)

// TPD_IpcExtension's functions (ipc.cpp; ipc_allocate in memory.cpp), in namespace ipc.
#define TPD_SIMULATOR_IPC_FUNCTIONS(X)         \
  X(ipc_allocate, TPD_Ipc_Allocate_Args)       \
  X(ipc_get_handle, TPD_Ipc_GetHandle_Args)    \
  X(ipc_open, TPD_Ipc_Open_Args)               \
  X(ipc_close, TPD_Ipc_Close_Args)

// TPD_ProfilerExtension's functions (extensions.cpp), in namespace profiler.
#define TPD_SIMULATOR_PROFILER_FUNCTIONS(X) X(event_timestamp, TPD_Profiler_EventTimestamp_Args)

// TPD_KernelModulesExtension's functions (modules.cpp), in namespace modules.
#define TPD_SIMULATOR_MODULE_FUNCTIONS(X)                   \
  X(module_load, TPD_Module_Load_Args)                      \
  X(module_unload, TPD_Module_Unload_Args)                  \
  X(module_get_function, TPD_Module_GetFunction_Args)       \
  X(kernel_launch, TPD_Kernel_Launch_Args)

// TPD_SimulatorExtension's functions (extensions.cpp), in namespace controls.
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

#define TPD_SIMULATOR_DECLARE_BODY(member, Args) void member(Args& args);

namespace torchplug::simulator {

// The two functions that return no error, so report none (drivers/common/errors.h);
// they take their arguments unchecked and are in the table as they are.
using drivers::error_destroy;
using drivers::error_message;

TPD_SIMULATOR_API_FUNCTIONS(TPD_SIMULATOR_DECLARE_BODY)

// The extensions' functions have namespaces of their own: their member names
// are short, and would read as the table's own in this one.
namespace ipc {
TPD_SIMULATOR_IPC_FUNCTIONS(TPD_SIMULATOR_DECLARE_BODY)
}  // namespace ipc

namespace profiler {
TPD_SIMULATOR_PROFILER_FUNCTIONS(TPD_SIMULATOR_DECLARE_BODY)
}  // namespace profiler

namespace modules {
TPD_SIMULATOR_MODULE_FUNCTIONS(TPD_SIMULATOR_DECLARE_BODY)
}  // namespace modules

namespace controls {
TPD_SIMULATOR_CONTROL_FUNCTIONS(TPD_SIMULATOR_DECLARE_BODY)
}  // namespace controls

}  // namespace torchplug::simulator

#undef TPD_SIMULATOR_DECLARE_BODY
