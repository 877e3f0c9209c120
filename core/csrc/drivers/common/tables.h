#pragma once
// The driver interface's function tables (torchplug/driver.h), each named once
// as a list X(member, Args) of its members, and the means to fill a table
// from a driver's bodies
//
//     void member(Args& args);
//
// with TPD_DRIVER_SET_MEMBER: a C function that checks `args` (there, and
// with a struct_size covering this header's members) and runs the body
// inside `guarded`, so that no exception crosses the C boundary. A driver
// built on these lists leaves no member out of a table it offers, and no
// member without these checks. error_destroy and error_message return no
// error, so they are in no list: a driver sets them as they are.
#include <cstddef>

#include "drivers/common/errors.h"
#include "torchplug/driver.h"

// TPD_Api's functions.
#define TPD_API_FUNCTIONS(X)                                         \
  X(error_get_code, TPD_Error_GetCode_Args)                          \
  X(client_create, TPD_Client_Create_Args)                           \
  X(client_destroy, TPD_Client_Destroy_Args)                         \
  X(client_device_count, TPD_Client_DeviceCount_Args)                \
  X(device_get_properties, TPD_Device_GetProperties_Args)            \
  X(memory_allocate, TPD_Memory_Allocate_Args)                       \
  X(memory_free, TPD_Memory_Free_Args)                               \
  X(memory_get_info, TPD_Memory_GetInfo_Args)                        \
  X(host_memory_allocate, TPD_HostMemory_Allocate_Args)              \
  X(host_memory_free, TPD_HostMemory_Free_Args)                      \
  X(memory_set_async, TPD_Memory_SetAsync_Args)                      \
  X(memory_copy_async, TPD_Memory_CopyAsync_Args)                    \
  X(stream_create, TPD_Stream_Create_Args)                           \
  X(stream_destroy, TPD_Stream_Destroy_Args)                         \
  X(stream_query, TPD_Stream_Query_Args)                             \
  X(stream_synchronize, TPD_Stream_Query_Args)                       \
  X(stream_wait_idle, TPD_Stream_Query_Args)                         \
  X(stream_wait_event, TPD_Stream_WaitEvent_Args)                    \
  X(stream_launch_host_function, TPD_Stream_LaunchHostFunction_Args) \
  X(event_create, TPD_Event_Create_Args)                             \
  X(event_destroy, TPD_Event_Query_Args)                             \
  X(event_record, TPD_Event_Record_Args)                             \
  X(event_query, TPD_Event_Query_Args)                               \
  X(event_synchronize, TPD_Event_Query_Args)                         \
  X(event_elapsed_time, TPD_Event_ElapsedTime_Args)

// TPD_IpcExtension's functions.
#define TPD_IPC_FUNCTIONS(X)                   \
  X(ipc_allocate, TPD_Ipc_Allocate_Args)       \
  X(ipc_get_handle, TPD_Ipc_GetHandle_Args)    \
  X(ipc_open, TPD_Ipc_Open_Args)               \
  X(ipc_close, TPD_Ipc_Close_Args)

// TPD_ProfilerExtension's functions.
#define TPD_PROFILER_FUNCTIONS(X) X(event_timestamp, TPD_Profiler_EventTimestamp_Args)

// TPD_KernelModulesExtension's functions.
#define TPD_KERNEL_MODULE_FUNCTIONS(X)                \
  X(module_load, TPD_Module_Load_Args)                \
  X(module_unload, TPD_Module_Unload_Args)            \
  X(module_get_function, TPD_Module_GetFunction_Args) \
  X(kernel_launch, TPD_Kernel_Launch_Args)

// TPD_GraphCaptureExtension's functions.
#define TPD_GRAPH_CAPTURE_FUNCTIONS(X)                 \
  X(begin_capture, TPD_Graph_BeginCapture_Args)        \
  X(end_capture, TPD_Graph_EndCapture_Args)            \
  X(graph_launch, TPD_Graph_Launch_Args)               \
  X(graph_destroy, TPD_Graph_Destroy_Args)

// Declares the body of a list's member (in the namespace the list is used in).
#define TPD_DRIVER_DECLARE_BODY(member, Args) void member(Args& args);

// Sets `table.member` to the C function of the body `member`, found from
// where the list is used, with the member's name for messages. Tables are
// filled member by member: several members share a type (stream_query,
// stream_synchronize), which positional initialisation could swap unnoticed.
#define TPD_DRIVER_SET_MEMBER(member, Args)                                                           \
  table.member = [](Args* args) noexcept {                                                            \
    return ::torchplug::drivers::guarded(#member, [&] { member(TPD_CHECKED_ARGS(Args, args)); });     \
  };

namespace torchplug::drivers {

// An extension table of `type`, its functions still unset, whose chain goes on at `next`.
template <typename Extension>
Extension extension_table(size_t struct_size, TPD_ExtensionType type, const void* next) {
  Extension table{};
  table.base.struct_size = struct_size;
  table.base.type = type;
  table.base.next = static_cast<const TPD_ExtensionBase*>(next);
  return table;
}

}  // namespace torchplug::drivers

// Defines `space::extension`, the table `Type` of extension `type` whose
// functions are the bodies of the list `FUNCTIONS` (seen from namespace
// `space`), and whose chain goes on at `next`; statements after those set
// its other members.
#define TPD_DRIVER_DEFINE_EXTENSION(space, Type, type, next, FUNCTIONS, ...)                       \
  namespace space {                                                                               \
  namespace {                                                                                     \
  Type make_extension() {                                                                         \
    auto table = ::torchplug::drivers::extension_table<Type>(Type##_STRUCT_SIZE, type, next);     \
    FUNCTIONS(TPD_DRIVER_SET_MEMBER)                                                              \
    __VA_ARGS__                                                                                   \
    return table;                                                                                 \
  }                                                                                               \
  const Type extension = make_extension();                                                        \
  }                                                                                               \
  }
