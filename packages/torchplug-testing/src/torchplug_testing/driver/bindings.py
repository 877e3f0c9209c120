"""ctypes bindings of the torchplug driver interface (``torchplug/driver.h``, API 1.0).

Every struct, enum and table member of the header has its counterpart here,
under the header's names. Only the standard library is used: a vendor checks a
driver library with these bindings on a machine without torch.
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Iterable
from ctypes import c_char_p, c_double, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any, TypeVar

API_MAJOR = 1
API_MINOR = 0
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


class SimulatorFault(enum.IntEnum):
    FAIL_ALLOCATIONS = 0
    FAIL_KERNELS = 1


def _struct(name: str, fields: list[tuple[str, Any]]) -> type[ctypes.Structure]:
    return type(name, (ctypes.Structure,), {"_fields_": fields})


def _args(name: str, *fields: tuple[str, Any]) -> type[ctypes.Structure]:
    """An argument struct: ``struct_size`` first, then ``fields``."""
    return _struct(name, [("struct_size", c_size_t), *fields])


# ------------------------------------------------------------------ errors

TPD_Error_Destroy_Args = _args("TPD_Error_Destroy_Args", ("error", c_handle))
TPD_Error_Message_Args = _args(
    "TPD_Error_Message_Args",
    ("error", c_handle),
    # Read with message_size rather than up to the NUL: the check compares both.
    ("message", c_void_p),
    ("message_size", c_size_t),
)
TPD_Error_GetCode_Args = _args("TPD_Error_GetCode_Args", ("error", c_handle), ("code", c_enum))

# ----------------------------------------------------------------- clients

TPD_Client_Create_Args = _args(
    "TPD_Client_Create_Args",
    ("name", c_char_p),
    ("options", c_char_p),
    ("client", c_handle),
)
TPD_Client_Destroy_Args = _args("TPD_Client_Destroy_Args", ("client", c_handle))

# ----------------------------------------------------------------- devices

TPD_Client_DeviceCount_Args = _args(
    "TPD_Client_DeviceCount_Args", ("client", c_handle), ("device_count", c_int)
)
TPD_DeviceProperties = _args(
    "TPD_DeviceProperties",
    ("name", ctypes.c_char * 64),
    ("total_memory", c_uint64),
    ("capabilities", c_uint64),
    ("stream_priority_greatest", c_int),
    ("stream_priority_least", c_int),
    ("memory_alignment", c_uint32),
)
TPD_Device_GetProperties_Args = _args(
    "TPD_Device_GetProperties_Args",
    ("client", c_handle),
    ("device", c_int),
    ("properties", ctypes.POINTER(TPD_DeviceProperties)),
)

# ------------------------------------------------------------------ memory

TPD_Memory_Allocate_Args = _args(
    "TPD_Memory_Allocate_Args",
    ("client", c_handle),
    ("device", c_int),
    ("size", c_size_t),
    ("pointer", c_void_p),
)
TPD_Memory_Free_Args = _args("TPD_Memory_Free_Args", ("client", c_handle), ("pointer", c_void_p))
TPD_Memory_GetInfo_Args = _args(
    "TPD_Memory_GetInfo_Args",
    ("client", c_handle),
    ("device", c_int),
    ("free_bytes", c_uint64),
    ("total_bytes", c_uint64),
)
TPD_HostMemory_Allocate_Args = _args(
    "TPD_HostMemory_Allocate_Args", ("client", c_handle), ("size", c_size_t), ("pointer", c_void_p)
)
TPD_HostMemory_Free_Args = _args(
    "TPD_HostMemory_Free_Args", ("client", c_handle), ("pointer", c_void_p)
)

# ----------------------------------------------------------------- streams

TPD_Stream_Create_Args = _args(
    "TPD_Stream_Create_Args",
    ("client", c_handle),
    ("device", c_int),
    ("priority", c_int),
    ("stream", c_handle),
)
TPD_Stream_Destroy_Args = _args(
    "TPD_Stream_Destroy_Args", ("client", c_handle), ("stream", c_handle)
)
TPD_Stream_Query_Args = _args(
    "TPD_Stream_Query_Args", ("client", c_handle), ("stream", c_handle), ("idle", c_int)
)
TPD_Stream_WaitEvent_Args = _args(
    "TPD_Stream_WaitEvent_Args", ("client", c_handle), ("stream", c_handle), ("event", c_handle)
)
# int (*)(void* user_data, char* message, size_t message_size); `message` is an
# address so that a Python host function can write into it with ctypes.memmove.
TPD_HostFunction = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)
TPD_Stream_LaunchHostFunction_Args = _args(
    "TPD_Stream_LaunchHostFunction_Args",
    ("client", c_handle),
    ("stream", c_handle),
    ("function", TPD_HostFunction),
    ("user_data", c_void_p),
)

# ------------------------------------------------------------- memset/copy

TPD_Memory_SetAsync_Args = _args(
    "TPD_Memory_SetAsync_Args",
    ("client", c_handle),
    ("stream", c_handle),
    ("pointer", c_void_p),
    ("value", c_int),
    ("size", c_size_t),
)
TPD_Memory_CopyAsync_Args = _args(
    "TPD_Memory_CopyAsync_Args",
    ("client", c_handle),
    ("stream", c_handle),
    ("destination", c_void_p),
    ("source", c_void_p),
    ("size", c_size_t),
    ("kind", c_enum),
)

# ------------------------------------------------------------------ events

TPD_Event_Create_Args = _args(
    "TPD_Event_Create_Args",
    ("client", c_handle),
    ("device", c_int),
    ("enable_timing", c_int),
    ("event", c_handle),
)
TPD_Event_Query_Args = _args(
    "TPD_Event_Query_Args", ("client", c_handle), ("event", c_handle), ("completed", c_int)
)
TPD_Event_Record_Args = _args(
    "TPD_Event_Record_Args", ("client", c_handle), ("event", c_handle), ("stream", c_handle)
)
TPD_Event_ElapsedTime_Args = _args(
    "TPD_Event_ElapsedTime_Args",
    ("client", c_handle),
    ("start", c_handle),
    ("end", c_handle),
    ("milliseconds", c_double),
)

# -------------------------------------------------------------- extensions

TPD_ExtensionBase = _args("TPD_ExtensionBase", ("type", c_enum), ("next", c_void_p))

TPD_Ipc_GetHandle_Args = _args(
    "TPD_Ipc_GetHandle_Args",
    ("client", c_handle),
    ("pointer", c_void_p),
    ("handle", ctypes.c_ubyte * IPC_HANDLE_SIZE),
)
TPD_Ipc_Open_Args = _args(
    "TPD_Ipc_Open_Args",
    ("client", c_handle),
    ("device", c_int),
    ("handle", c_void_p),
    ("pointer", c_void_p),
    ("size", c_size_t),
)
TPD_Ipc_Close_Args = _args("TPD_Ipc_Close_Args", ("client", c_handle), ("pointer", c_void_p))
TPD_Profiler_EventTimestamp_Args = _args(
    "TPD_Profiler_EventTimestamp_Args",
    ("client", c_handle),
    ("event", c_handle),
    ("nanoseconds", c_int64),
)
TPD_Simulator_Configure_Args = _args(
    "TPD_Simulator_Configure_Args",
    ("client", c_handle),
    ("device_count", c_int),
    ("capacity_bytes", c_uint64),
)
TPD_Simulator_InjectFault_Args = _args(
    "TPD_Simulator_InjectFault_Args",
    ("client", c_handle),
    ("device", c_int),
    ("fault", c_enum),
    ("count", c_int),
)

# A function member: (name, argument struct, whether it returns TPD_Error* or void).
Member = tuple[str, type[ctypes.Structure], bool]

IPC_MEMBERS: tuple[Member, ...] = (
    ("ipc_get_handle", TPD_Ipc_GetHandle_Args, True),
    ("ipc_open", TPD_Ipc_Open_Args, True),
    ("ipc_close", TPD_Ipc_Close_Args, True),
)
PROFILER_MEMBERS: tuple[Member, ...] = (
    ("event_timestamp", TPD_Profiler_EventTimestamp_Args, True),
)
SIMULATOR_MEMBERS: tuple[Member, ...] = (
    ("configure", TPD_Simulator_Configure_Args, True),
    ("inject_fault", TPD_Simulator_InjectFault_Args, True),
)

# ------------------------------------------------------------------- table

TPD_ApiVersion = _struct("TPD_ApiVersion", [("major", c_int), ("minor", c_int)])

API_MEMBERS: tuple[Member, ...] = (
    ("error_destroy", TPD_Error_Destroy_Args, False),
    ("error_message", TPD_Error_Message_Args, False),
    ("error_get_code", TPD_Error_GetCode_Args, True),
    ("client_create", TPD_Client_Create_Args, True),
    ("client_destroy", TPD_Client_Destroy_Args, True),
    ("client_device_count", TPD_Client_DeviceCount_Args, True),
    ("device_get_properties", TPD_Device_GetProperties_Args, True),
    ("memory_allocate", TPD_Memory_Allocate_Args, True),
    ("memory_free", TPD_Memory_Free_Args, True),
    ("memory_get_info", TPD_Memory_GetInfo_Args, True),
    ("host_memory_allocate", TPD_HostMemory_Allocate_Args, True),
    ("host_memory_free", TPD_HostMemory_Free_Args, True),
    ("memory_set_async", TPD_Memory_SetAsync_Args, True),
    ("memory_copy_async", TPD_Memory_CopyAsync_Args, True),
    ("stream_create", TPD_Stream_Create_Args, True),
    ("stream_destroy", TPD_Stream_Destroy_Args, True),
    ("stream_query", TPD_Stream_Query_Args, True),
    ("stream_synchronize", TPD_Stream_Query_Args, True),
    ("stream_wait_event", TPD_Stream_WaitEvent_Args, True),
    ("stream_launch_host_function", TPD_Stream_LaunchHostFunction_Args, True),
    ("event_create", TPD_Event_Create_Args, True),
    ("event_destroy", TPD_Event_Query_Args, True),
    ("event_record", TPD_Event_Record_Args, True),
    ("event_query", TPD_Event_Query_Args, True),
    ("event_synchronize", TPD_Event_Query_Args, True),
    ("event_elapsed_time", TPD_Event_ElapsedTime_Args, True),
)


def _function_fields(members: Iterable[Member]) -> list[tuple[str, Any]]:
    # Every call releases the GIL (CFUNCTYPE), so Python threads call the driver concurrently.
    return [
        (name, ctypes.CFUNCTYPE(c_handle if error else None, ctypes.POINTER(args)))
        for name, args, error in members
    ]


def _extension(name: str, members: tuple[Member, ...]) -> type[ctypes.Structure]:
    base = [("struct_size", c_size_t), ("type", c_enum), ("next", c_void_p)]
    return _struct(name, base + _function_fields(members))


TPD_IpcExtension = _extension("TPD_IpcExtension", IPC_MEMBERS)
TPD_ProfilerExtension = _extension("TPD_ProfilerExtension", PROFILER_MEMBERS)
TPD_SimulatorExtension = _extension("TPD_SimulatorExtension", SIMULATOR_MEMBERS)
EXTENSIONS: dict[ExtensionType, tuple[type[ctypes.Structure], tuple[Member, ...]]] = {
    ExtensionType.IPC: (TPD_IpcExtension, IPC_MEMBERS),
    ExtensionType.PROFILER: (TPD_ProfilerExtension, PROFILER_MEMBERS),
    ExtensionType.SIMULATOR: (TPD_SimulatorExtension, SIMULATOR_MEMBERS),
}

TPD_Api = _struct(
    "TPD_Api",
    [
        ("struct_size", c_size_t),
        ("extension_start", c_void_p),
        ("api_version", TPD_ApiVersion),
        ("driver_name", c_char_p),
        ("driver_version", c_char_p),
        *_function_fields(API_MEMBERS),
    ],
)

# Every struct of the header, in its order.
STRUCTS: tuple[type[ctypes.Structure], ...] = tuple(
    value
    for name, value in dict(globals()).items()
    if name.startswith("TPD_") and isinstance(value, type) and issubclass(value, ctypes.Structure)
)


def struct_size(struct: type[ctypes.Structure]) -> int:
    """``TPD_STRUCT_SIZE`` of ``struct``: the end of its last member, without tail padding."""
    last = getattr(struct, struct._fields_[-1][0])
    return last.offset + last.size


# The structs with a TPD_<Struct>_STRUCT_SIZE macro: those that start with
# struct_size, except the extension base (each extension has its own).
STRUCT_SIZES: dict[type[ctypes.Structure], int] = {
    struct: struct_size(struct)
    for struct in STRUCTS
    if struct._fields_[0][0] == "struct_size" and struct is not TPD_ExtensionBase
}

S = TypeVar("S", bound=ctypes.Structure)


def new(struct: type[S], **values: Any) -> S:
    """An instance of ``struct`` with ``values`` and ``struct_size`` set as this header's caller."""
    return struct(struct_size=STRUCT_SIZES[struct], **values)
