#pragma once
// The functions of the simulator's TPD_Api table and extensions, by the file
// that defines them; api.cpp puts them in the table.
#include "torchplug/driver.h"

namespace torchplug::simulator {

// errors.cpp
void error_destroy(TPD_Error_Destroy_Args* args);
void error_message(TPD_Error_Message_Args* args);
TPD_Error* error_get_code(TPD_Error_GetCode_Args* args);

// clients.cpp
TPD_Error* client_create(TPD_Client_Create_Args* args);
TPD_Error* client_destroy(TPD_Client_Destroy_Args* args);
TPD_Error* client_device_count(TPD_Client_DeviceCount_Args* args);
TPD_Error* device_get_properties(TPD_Device_GetProperties_Args* args);

// memory.cpp
TPD_Error* memory_allocate(TPD_Memory_Allocate_Args* args);
TPD_Error* memory_free(TPD_Memory_Free_Args* args);
TPD_Error* memory_get_info(TPD_Memory_GetInfo_Args* args);
TPD_Error* host_memory_allocate(TPD_HostMemory_Allocate_Args* args);
TPD_Error* host_memory_free(TPD_HostMemory_Free_Args* args);
TPD_Error* memory_set_async(TPD_Memory_SetAsync_Args* args);
TPD_Error* memory_copy_async(TPD_Memory_CopyAsync_Args* args);

// streams.cpp
TPD_Error* stream_create(TPD_Stream_Create_Args* args);
TPD_Error* stream_destroy(TPD_Stream_Destroy_Args* args);
TPD_Error* stream_query(TPD_Stream_Query_Args* args);
TPD_Error* stream_synchronize(TPD_Stream_Query_Args* args);
TPD_Error* stream_wait_event(TPD_Stream_WaitEvent_Args* args);
TPD_Error* stream_launch_host_function(TPD_Stream_LaunchHostFunction_Args* args);

// events.cpp
TPD_Error* event_create(TPD_Event_Create_Args* args);
TPD_Error* event_destroy(TPD_Event_Query_Args* args);
TPD_Error* event_record(TPD_Event_Record_Args* args);
TPD_Error* event_query(TPD_Event_Query_Args* args);
TPD_Error* event_synchronize(TPD_Event_Query_Args* args);
TPD_Error* event_elapsed_time(TPD_Event_ElapsedTime_Args* args);

// extensions.cpp
TPD_Error* profiler_event_timestamp(TPD_Profiler_EventTimestamp_Args* args);
TPD_Error* simulator_configure(TPD_Simulator_Configure_Args* args);
TPD_Error* simulator_inject_fault(TPD_Simulator_InjectFault_Args* args);

}  // namespace torchplug::simulator
