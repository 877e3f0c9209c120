"""ctypes bindings of the torchplug driver interface (``torchplug/driver.h``, API 1.2).

Every struct, enum and table member of the header has its counterpart here,
under the header's names. Only the standard library is used: a vendor checks a
driver library with these bindings on a machine without torch.
"""

from __future__ import annotations

import ctypes
import enum
import re
from collections.abc import Iterable
from ctypes import c_char_p, c_double, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any, TypeVar

API_MAJOR = 1
API_MINOR = 2
ENTRY_POINT = "TPD_GetApi"
IPC_HANDLE_SIZE = 64

# C enums are int-sized on every ABI the header targets (their values fit an int).
c_enum = c_int
# The opaque handles (TPD_Error*, TPD_Client*, TPD_Stream*, TPD_Event*) and
# untyped pointers are plain addresses: None for NULL, an int otherwise.
c_handle = c_void_p


class ErrorCode(enum.IntEnum):
    SUCCESS = 0
    INVALID_ARGUMENT = 1
    INVALID_DEVICE = 2
    INVALID_HANDLE = 3
    OUT_OF_MEMORY = 4
    NOT_READY = 5
    UNSUPPORTED = 6
    VERSION_MISMATCH = 7
    EXECUTION_FAILED = 8
    UNAVAILABLE = 9
    INTERNAL = 10


class Capability(enum.IntFlag):
    HOST_ADDRESSABLE_MEMORY = 1 << 0
    PEER_COPY = 1 << 1
    TIMING_EVENTS = 1 << 2
    STREAM_PRIORITIES = 1 << 3


class CopyKind(enum.IntEnum):
    HOST_TO_DEVICE = 0
    DEVICE_TO_HOST = 1
    DEVICE_TO_DEVICE = 2


class ExtensionType(enum.IntEnum):
    IPC = 1
    PROFILER = 2
    GRAPH_CAPTURE = 3
    KERNEL_MODULES = 4
    SIMULATOR = 100


class KernelArgKind(enum.IntEnum):
    POINTER = 0
    INT64 = 1
    FLOAT64 = 2


# The format of images for devices that run the host's machine code.
KERNEL_FORMAT_HOST_ELF = "torchplug-host-elf-1"


class TPD_KernelValue(ctypes.Union):
    _fields_ = [("pointer", c_void_p), ("int64", c_int64), ("float64", c_double)]


class SimulatorFault(enum.IntEnum):
    FAIL_ALLOCATIONS = 0
    FAIL_KERNELS = 1
    FAIL_KERNEL_LAUNCHES = 2


# int (*)(void* user_data, char* message, size_t message_size); `message` is an
# address so that a Python host function can write into it with ctypes.memmove.
TPD_HostFunction = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)

# The member types as the header spells them (without `const`), so that each
# struct below is declared in the header's words and reads against it member by
# member. A struct declared before is a member type too, by value or by pointer.
_TYPES: dict[str, Any] = {
    "char": ctypes.c_char,
    "unsigned char": ctypes.c_ubyte,
    "int": c_int,
    "uint32_t": c_uint32,
    "uint64_t": c_uint64,
    "int64_t": c_int64,
    "size_t": c_size_t,
    "double": c_double,
    "char*": c_char_p,
    "void*": c_void_p,
    # open_access's array of pointers, passed as its address.
    "void* const*": c_void_p,
    "unsigned char*": c_void_p,
    "TPD_ErrorCode": c_enum,
    "TPD_CopyKind": c_enum,
    "TPD_ExtensionType": c_enum,
    "TPD_SimulatorFault": c_enum,
    "TPD_KernelArgKind": c_enum,
    "TPD_KernelValue": TPD_KernelValue,
    "TPD_Error*": c_handle,
    "TPD_Client*": c_handle,
    "TPD_Stream*": c_handle,
    "TPD_Event*": c_handle,
    "TPD_Module*": c_handle,
    "TPD_Function*": c_handle,
    "TPD_Graph*": c_handle,
    # The extension chain is walked by address.
    "TPD_ExtensionBase*": c_void_p,
    "TPD_HostFunction": TPD_HostFunction,
}

# The structs built so far, by name, in the header's order.
_STRUCTS: dict[str, type[ctypes.Structure]] = {}

# A function member: (name, argument struct, whether it returns TPD_Error* or void).
Member = tuple[str, type[ctypes.Structure], bool]


def _c_type(spelled: str) -> Any:
    """The ctypes type of the member type ``spelled``."""
    if spelled in _TYPES:
        return _TYPES[spelled]
    struct = _STRUCTS[spelled.removesuffix("*")]
    return ctypes.POINTER(struct) if spelled.endswith("*") else struct


def _struct(name: str, members: str, functions: Iterable[Member] = ()) -> type[ctypes.Structure]:
    """The struct ``name`` of ``members`` ("type name; type name[length]; ...") and then
    the function pointers ``functions``."""
    fields: list[tuple[str, Any]] = []
    for member in members.split(";"):
        spelled, _, declarator = member.strip().removeprefix("const ").rpartition(" ")
        field, _, length = declarator.partition("[")
        c_type = _c_type(spelled)
        fields.append((field, c_type * int(length.rstrip("]")) if length else c_type))
    # Every call releases the GIL (CFUNCTYPE), so Python threads call the driver concurrently.
    fields += [
        (function, ctypes.CFUNCTYPE(c_handle if error else None, ctypes.POINTER(args)))
        for function, args, error in functions
    ]
    _STRUCTS[name] = type(name, (ctypes.Structure,), {"_fields_": fields})
    return _STRUCTS[name]


def _sized(name: str, members: str, functions: Iterable[Member] = ()) -> type[ctypes.Structure]:
    """A versioned struct: ``size_t struct_size`` first, then ``members`` and ``functions``."""
    return _struct(name, f"size_t struct_size; {members}", functions)


def _functions(declarations: str) -> tuple[Member, ...]:
    """The function members ``declarations``, spelled as the header spells them:
    "TPD_Error* (*name)(Args* args);" or "void (*name)(Args* args);", in its order."""
    members: list[Member] = []
    for declaration in filter(None, (part.strip() for part in declarations.split(";"))):
        spelled = re.fullmatch(r"(TPD_Error\*|void) \(\*(\w+)\)\((\w+)\* args\)", declaration)
        assert spelled, f"not a function member: {declaration!r}"
        result, name, args = spelled.groups()
        members.append((name, _STRUCTS[args], result != "void"))
    return tuple(members)


def _client(name: str, members: str) -> type[ctypes.Structure]:
    """The arguments of a client's call: ``struct_size``, ``TPD_Client* client``, ``members``."""
    return _sized(name, f"TPD_Client* client; {members}")


# One struct a line, in the header's order and words, left unwrapped so that the
# block reads against the header as a table.
# fmt: off

# ------------------------------------------------------------------ errors
TPD_Error_Destroy_Args = _sized("TPD_Error_Destroy_Args", "TPD_Error* error")
# `message`, a const char*, is read as an address with message_size rather than up
# to the NUL: the check compares both.
TPD_Error_Message_Args = _sized("TPD_Error_Message_Args", "const TPD_Error* error; const void* message; size_t message_size")
TPD_Error_GetCode_Args = _sized("TPD_Error_GetCode_Args", "const TPD_Error* error; TPD_ErrorCode code")

# ----------------------------------------------------------------- clients
TPD_Client_Create_Args = _sized("TPD_Client_Create_Args", "const char* name; const char* options; TPD_Client* client")
TPD_Client_Destroy_Args = _sized("TPD_Client_Destroy_Args", "TPD_Client* client")

# ----------------------------------------------------------------- devices
TPD_Client_DeviceCount_Args = _client("TPD_Client_DeviceCount_Args", "int device_count")
TPD_DeviceProperties = _sized("TPD_DeviceProperties", "char name[64]; uint64_t total_memory; uint64_t capabilities; int stream_priority_greatest; int stream_priority_least; uint32_t memory_alignment")
TPD_Device_GetProperties_Args = _client("TPD_Device_GetProperties_Args", "int device; TPD_DeviceProperties* properties")

# ------------------------------------------------------------------ memory
TPD_Memory_Allocate_Args = _client("TPD_Memory_Allocate_Args", "int device; size_t size; void* pointer")
TPD_Memory_Free_Args = _client("TPD_Memory_Free_Args", "void* pointer")
TPD_Memory_GetInfo_Args = _client("TPD_Memory_GetInfo_Args", "int device; uint64_t free_bytes; uint64_t total_bytes")
TPD_HostMemory_Allocate_Args = _client("TPD_HostMemory_Allocate_Args", "size_t size; void* pointer")
TPD_HostMemory_Free_Args = _client("TPD_HostMemory_Free_Args", "void* pointer")

# ----------------------------------------------------------------- streams
TPD_Stream_Create_Args = _client("TPD_Stream_Create_Args", "int device; int priority; TPD_Stream* stream")
TPD_Stream_Destroy_Args = _client("TPD_Stream_Destroy_Args", "TPD_Stream* stream")
TPD_Stream_Query_Args = _client("TPD_Stream_Query_Args", "TPD_Stream* stream; int idle; int failed")
TPD_Stream_WaitEvent_Args = _client("TPD_Stream_WaitEvent_Args", "TPD_Stream* stream; TPD_Event* event")
TPD_Stream_LaunchHostFunction_Args = _client("TPD_Stream_LaunchHostFunction_Args", "TPD_Stream* stream; TPD_HostFunction function; void* user_data")

# ------------------------------------------------------------- memset/copy
TPD_Memory_SetAsync_Args = _client("TPD_Memory_SetAsync_Args", "TPD_Stream* stream; void* pointer; int value; size_t size")
TPD_Memory_CopyAsync_Args = _client("TPD_Memory_CopyAsync_Args", "TPD_Stream* stream; void* destination; const void* source; size_t size; TPD_CopyKind kind")

# ------------------------------------------------------------------ events
TPD_Event_Create_Args = _client("TPD_Event_Create_Args", "int device; int enable_timing; TPD_Event* event")
TPD_Event_Query_Args = _client("TPD_Event_Query_Args", "TPD_Event* event; int completed")
TPD_Event_Record_Args = _client("TPD_Event_Record_Args", "TPD_Event* event; TPD_Stream* stream")
TPD_Event_ElapsedTime_Args = _client("TPD_Event_ElapsedTime_Args", "TPD_Event* start; TPD_Event* end; double milliseconds")

# -------------------------------------------------------------- extensions
TPD_ExtensionBase = _sized("TPD_ExtensionBase", "TPD_ExtensionType type; const TPD_ExtensionBase* next")
TPD_Ipc_Allocate_Args = _client("TPD_Ipc_Allocate_Args", "int device; size_t size; void* pointer")
TPD_Ipc_GetHandle_Args = _client("TPD_Ipc_GetHandle_Args", f"void* pointer; unsigned char handle[{IPC_HANDLE_SIZE}]")
TPD_Ipc_Open_Args = _client("TPD_Ipc_Open_Args", "int device; const unsigned char* handle; void* pointer; size_t size")
TPD_Ipc_Close_Args = _client("TPD_Ipc_Close_Args", "void* pointer")
TPD_Profiler_EventTimestamp_Args = _client("TPD_Profiler_EventTimestamp_Args", "TPD_Event* event; int64_t nanoseconds")
TPD_Module_Load_Args = _client("TPD_Module_Load_Args", "const void* image; size_t image_size; TPD_Module* module")
TPD_Module_Unload_Args = _client("TPD_Module_Unload_Args", "TPD_Module* module")
TPD_Module_GetFunction_Args = _client("TPD_Module_GetFunction_Args", "TPD_Module* module; const char* name; TPD_Function* function")
TPD_KernelArg = _struct("TPD_KernelArg", "TPD_KernelArgKind kind; TPD_KernelValue value")
TPD_Kernel_Launch_Args = _client("TPD_Kernel_Launch_Args", "TPD_Stream* stream; TPD_Function* function; const TPD_KernelArg* args; size_t arg_count")
TPD_Graph_BeginCapture_Args = _client("TPD_Graph_BeginCapture_Args", "TPD_Stream* stream")
TPD_Graph_EndCapture_Args = _client("TPD_Graph_EndCapture_Args", "TPD_Stream* stream; TPD_Graph* graph; size_t work_count")
TPD_Graph_Launch_Args = _client("TPD_Graph_Launch_Args", "TPD_Graph* graph; TPD_Stream* stream")
TPD_Graph_Destroy_Args = _client("TPD_Graph_Destroy_Args", "TPD_Graph* graph")
TPD_Simulator_Configure_Args = _client("TPD_Simulator_Configure_Args", "int device_count; uint64_t capacity_bytes")
TPD_Simulator_InjectFault_Args = _client("TPD_Simulator_InjectFault_Args", "int device; TPD_SimulatorFault fault; int count")
TPD_Simulator_TakeKernelFault_Args = _client("TPD_Simulator_TakeKernelFault_Args", "int device; int taken")
TPD_Simulator_StrictMemory_Args = _client("TPD_Simulator_StrictMemory_Args", "int enable; int enabled")
TPD_Simulator_Access_Args = _client("TPD_Simulator_Access_Args", "const void* const* pointers; size_t pointer_count; void* window")
TPD_Simulator_Adopt_Args = _client("TPD_Simulator_Adopt_Args", "int device; uint64_t bytes; int release")
TPD_Simulator_Stats_Args = _client("TPD_Simulator_Stats_Args", "int device; int reset_peak; int initialized; int64_t used_bytes; int64_t peak_used_bytes; int64_t allocation_count; int64_t free_count; int64_t failed_allocations")
TPD_Simulator_Sleep_Args = _client("TPD_Simulator_Sleep_Args", "TPD_Stream* stream; double milliseconds")

# fmt: on

IPC_MEMBERS = _functions(
    "TPD_Error* (*ipc_allocate)(TPD_Ipc_Allocate_Args* args);"
    "TPD_Error* (*ipc_get_handle)(TPD_Ipc_GetHandle_Args* args);"
    "TPD_Error* (*ipc_open)(TPD_Ipc_Open_Args* args);"
    "TPD_Error* (*ipc_close)(TPD_Ipc_Close_Args* args);"
)
PROFILER_MEMBERS = _functions(
    "TPD_Error* (*event_timestamp)(TPD_Profiler_EventTimestamp_Args* args);"
)
KERNEL_MODULE_MEMBERS = _functions(
    "TPD_Error* (*module_load)(TPD_Module_Load_Args* args);"
    "TPD_Error* (*module_unload)(TPD_Module_Unload_Args* args);"
    "TPD_Error* (*module_get_function)(TPD_Module_GetFunction_Args* args);"
    "TPD_Error* (*kernel_launch)(TPD_Kernel_Launch_Args* args);"
)
GRAPH_CAPTURE_MEMBERS = _functions(
    "TPD_Error* (*begin_capture)(TPD_Graph_BeginCapture_Args* args);"
    "TPD_Error* (*end_capture)(TPD_Graph_EndCapture_Args* args);"
    "TPD_Error* (*graph_launch)(TPD_Graph_Launch_Args* args);"
    "TPD_Error* (*graph_destroy)(TPD_Graph_Destroy_Args* args);"
)
SIMULATOR_MEMBERS = _functions(
    "TPD_Error* (*configure)(TPD_Simulator_Configure_Args* args);"
    "TPD_Error* (*inject_fault)(TPD_Simulator_InjectFault_Args* args);"
    "TPD_Error* (*take_kernel_fault)(TPD_Simulator_TakeKernelFault_Args* args);"
    "TPD_Error* (*strict_memory)(TPD_Simulator_StrictMemory_Args* args);"
    "TPD_Error* (*open_access)(TPD_Simulator_Access_Args* args);"
    "TPD_Error* (*close_access)(TPD_Simulator_Access_Args* args);"
    "TPD_Error* (*adopt)(TPD_Simulator_Adopt_Args* args);"
    "TPD_Error* (*stats)(TPD_Simulator_Stats_Args* args);"
    "TPD_Error* (*sleep)(TPD_Simulator_Sleep_Args* args);"
)


# ------------------------------------------------------------------- table

TPD_ApiVersion = _struct("TPD_ApiVersion", "int major; int minor")

API_MEMBERS = _functions(
    "void (*error_destroy)(TPD_Error_Destroy_Args* args);"
    "void (*error_message)(TPD_Error_Message_Args* args);"
    "TPD_Error* (*error_get_code)(TPD_Error_GetCode_Args* args);"
    "TPD_Error* (*client_create)(TPD_Client_Create_Args* args);"
    "TPD_Error* (*client_destroy)(TPD_Client_Destroy_Args* args);"
    "TPD_Error* (*client_device_count)(TPD_Client_DeviceCount_Args* args);"
    "TPD_Error* (*device_get_properties)(TPD_Device_GetProperties_Args* args);"
    "TPD_Error* (*memory_allocate)(TPD_Memory_Allocate_Args* args);"
    "TPD_Error* (*memory_free)(TPD_Memory_Free_Args* args);"
    "TPD_Error* (*memory_get_info)(TPD_Memory_GetInfo_Args* args);"
    "TPD_Error* (*host_memory_allocate)(TPD_HostMemory_Allocate_Args* args);"
    "TPD_Error* (*host_memory_free)(TPD_HostMemory_Free_Args* args);"
    "TPD_Error* (*memory_set_async)(TPD_Memory_SetAsync_Args* args);"
    "TPD_Error* (*memory_copy_async)(TPD_Memory_CopyAsync_Args* args);"
    "TPD_Error* (*stream_create)(TPD_Stream_Create_Args* args);"
    "TPD_Error* (*stream_destroy)(TPD_Stream_Destroy_Args* args);"
    "TPD_Error* (*stream_query)(TPD_Stream_Query_Args* args);"
    "TPD_Error* (*stream_synchronize)(TPD_Stream_Query_Args* args);"
    "TPD_Error* (*stream_wait_event)(TPD_Stream_WaitEvent_Args* args);"
    "TPD_Error* (*stream_launch_host_function)(TPD_Stream_LaunchHostFunction_Args* args);"
    "TPD_Error* (*event_create)(TPD_Event_Create_Args* args);"
    "TPD_Error* (*event_destroy)(TPD_Event_Query_Args* args);"
    "TPD_Error* (*event_record)(TPD_Event_Record_Args* args);"
    "TPD_Error* (*event_query)(TPD_Event_Query_Args* args);"
    "TPD_Error* (*event_synchronize)(TPD_Event_Query_Args* args);"
    "TPD_Error* (*event_elapsed_time)(TPD_Event_ElapsedTime_Args* args);"
    "TPD_Error* (*stream_wait_idle)(TPD_Stream_Query_Args* args);"
)
# The argument struct of each member of the table, by the member's name.
ARGUMENTS: dict[str, type[ctypes.Structure]] = {name: args for name, args, _ in API_MEMBERS}

# Each extension starts with its TPD_ExtensionBase.
_EXTENSION_BASE = "TPD_ExtensionBase base"
TPD_IpcExtension = _struct("TPD_IpcExtension", _EXTENSION_BASE, IPC_MEMBERS)
TPD_ProfilerExtension = _struct("TPD_ProfilerExtension", _EXTENSION_BASE, PROFILER_MEMBERS)
TPD_KernelModulesExtension = _struct(
    "TPD_KernelModulesExtension",
    f"{_EXTENSION_BASE}; const char* image_format",
    KERNEL_MODULE_MEMBERS,
)
TPD_GraphCaptureExtension = _struct(
    "TPD_GraphCaptureExtension", _EXTENSION_BASE, GRAPH_CAPTURE_MEMBERS
)
TPD_SimulatorExtension = _struct("TPD_SimulatorExtension", _EXTENSION_BASE, SIMULATOR_MEMBERS)
EXTENSIONS: dict[ExtensionType, tuple[type[ctypes.Structure], tuple[Member, ...]]] = {
    ExtensionType.IPC: (TPD_IpcExtension, IPC_MEMBERS),
    ExtensionType.PROFILER: (TPD_ProfilerExtension, PROFILER_MEMBERS),
    ExtensionType.KERNEL_MODULES: (TPD_KernelModulesExtension, KERNEL_MODULE_MEMBERS),
    ExtensionType.GRAPH_CAPTURE: (TPD_GraphCaptureExtension, GRAPH_CAPTURE_MEMBERS),
    ExtensionType.SIMULATOR: (TPD_SimulatorExtension, SIMULATOR_MEMBERS),
}

TPD_Api = _sized(
    "TPD_Api",
    "const TPD_ExtensionBase* extension_start; TPD_ApiVersion api_version;"
    " const char* driver_name; const char* driver_version",
    API_MEMBERS,
)

# Every struct of the header, in its order.
STRUCTS: tuple[type[ctypes.Structure], ...] = tuple(_STRUCTS.values())


def struct_size(struct: type[ctypes.Structure]) -> int:
    """``TPD_STRUCT_SIZE`` of ``struct``: the end of its last member, without tail padding."""
    last = getattr(struct, struct._fields_[-1][0])
    return last.offset + last.size


# The structs with a TPD_<Struct>_STRUCT_SIZE macro: those that start with
# struct_size or with an extension base (whose struct_size is the extension's),
# not the extension base itself.
STRUCT_SIZES: dict[type[ctypes.Structure], int] = {
    struct: struct_size(struct)
    for struct in STRUCTS
    if struct._fields_[0][0] in ("struct_size", "base") and struct is not TPD_ExtensionBase
}

S = TypeVar("S", bound=ctypes.Structure)


def new(struct: type[S], **values: Any) -> S:
    """An instance of ``struct`` with ``values`` and ``struct_size`` set as this header's caller."""
    return struct(struct_size=STRUCT_SIZES[struct], **values)
