"""Checks of error paths: bad devices, handles, NULLs, and the struct_size versioning."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from ctypes import addressof, byref, create_string_buffer, pointer
from typing import Any

from torchplug_testing.driver.bindings import (
    API_MAJOR,
    API_MINOR,
    STRUCT_SIZES,
    Capability,
    CopyKind,
    ErrorCode,
    TPD_Client_Create_Args,
    TPD_Client_DeviceCount_Args,
    TPD_DeviceProperties,
    TPD_Error_GetCode_Args,
    TPD_HostFunction,
    new,
)
from torchplug_testing.driver.harness import CheckFailure, Context, check, ensure, keep_alive
from torchplug_testing.driver.loader import DriverError

INVALID_HANDLE = ErrorCode.INVALID_HANDLE
INVALID_ARGUMENT = ErrorCode.INVALID_ARGUMENT


@check
def check_invalid_device(ctx: Context) -> None:
    """Device -1 and device_count are INVALID_DEVICE wherever a device index is taken."""
    for device in (-1, ctx.device_count):
        ctx.expect(ErrorCode.INVALID_DEVICE, ctx.properties, device)
        ctx.expect(ErrorCode.INVALID_DEVICE, ctx.allocate, 64, device)
        ctx.expect(
            ErrorCode.INVALID_DEVICE,
            ctx.call,
            "memory_get_info",
            device=device,
        )
        ctx.expect(ErrorCode.INVALID_DEVICE, ctx.stream, device)
        ctx.expect(ErrorCode.INVALID_DEVICE, ctx.event, device)


def _bogus_handles() -> list[int]:
    """Addresses the driver did not hand out: one into readable garbage (caught only by a
    driver that looks its handles up), one below the lowest address Linux maps."""
    garbage = create_string_buffer(os.urandom(4096))
    keep_alive(garbage)
    return [addressof(garbage) + 64, 0x8000]


def _stream_uses(
    ctx: Context, stream: int, event: int, address: int | None
) -> dict[str, Callable[[], Any]]:
    return {
        "stream_query": lambda: ctx.idle(stream),
        "stream_synchronize": lambda: ctx.synchronize(stream),
        "stream_wait_idle": lambda: ctx.call("stream_wait_idle", stream=stream),
        "stream_launch_host_function": lambda: ctx.host_function(stream, lambda: None),
        "memory_set_async": lambda: ctx.memset(stream, address, 0, 64),
        "memory_copy_async": lambda: ctx.copy(
            stream, address, address, 64, CopyKind.DEVICE_TO_DEVICE
        ),
        "stream_wait_event": lambda: ctx.wait_event(stream, event),
        "event_record": lambda: ctx.record(event, stream),
        "stream_destroy": lambda: ctx.destroy_stream(stream),
    }


def _event_uses(ctx: Context, event: int, stream: int, other: int) -> dict[str, Callable[[], Any]]:
    return {
        "event_query": lambda: ctx.completed(event),
        "event_synchronize": lambda: ctx.event_synchronize(event),
        "event_record": lambda: ctx.record(event, stream),
        "stream_wait_event": lambda: ctx.wait_event(stream, event),
        "event_elapsed_time": lambda: ctx.call("event_elapsed_time", start=event, end=other),
        "event_destroy": lambda: ctx.destroy_event(event),
    }


def _expect_all(
    ctx: Context, uses: dict[str, Callable[[], Any]], what: str, codes: dict[str, set[ErrorCode]]
) -> None:
    for member, use in uses.items():
        try:
            ctx.expect(codes.get(member, {INVALID_HANDLE}), use)
        except CheckFailure as failure:
            raise CheckFailure(f"{member} with {what}: {failure}") from None


def _elapsed_codes(ctx: Context) -> dict[str, set[ErrorCode]]:
    # Without timing events, UNSUPPORTED may be found before the handle is looked at.
    if ctx.has(Capability.TIMING_EVENTS):
        return {}
    return {"event_elapsed_time": {INVALID_HANDLE, ErrorCode.UNSUPPORTED}}


@check
def check_invalid_stream_handles(ctx: Context) -> None:
    """A pointer that is no stream is INVALID_HANDLE in every stream argument."""
    event, address = ctx.event(), ctx.allocate(64)
    for bogus in _bogus_handles():
        _expect_all(ctx, _stream_uses(ctx, bogus, event, address), f"stream {bogus:#x}", {})


@check
def check_invalid_event_handles(ctx: Context) -> None:
    """A pointer that is no event is INVALID_HANDLE in every event argument."""
    stream, other = ctx.stream(), ctx.event(timing=ctx.has(Capability.TIMING_EVENTS))
    for bogus in _bogus_handles():
        _expect_all(
            ctx, _event_uses(ctx, bogus, stream, other), f"event {bogus:#x}", _elapsed_codes(ctx)
        )


@check
def check_destroyed_handles(ctx: Context) -> None:
    """A stream or event used after its destroy is INVALID_HANDLE."""
    timing = ctx.has(Capability.TIMING_EVENTS)
    stream, event, other, address = (
        ctx.stream(),
        ctx.event(),
        ctx.event(timing=timing),
        ctx.allocate(64),
    )
    # Both are destroyed before the uses: a handle created later could reuse an address.
    dead_stream, dead_event = ctx.stream(), ctx.event(timing=timing)
    ctx.destroy_stream(dead_stream)
    ctx.destroy_event(dead_event)
    _expect_all(ctx, _stream_uses(ctx, dead_stream, event, address), "a destroyed stream", {})
    _expect_all(
        ctx, _event_uses(ctx, dead_event, stream, other), "a destroyed event", _elapsed_codes(ctx)
    )


@check
def check_invalid_memory_pointers(ctx: Context) -> None:
    """Freeing what memory_allocate / host_memory_allocate did not hand out is INVALID_HANDLE."""
    device, pinned = ctx.allocate(4096), ctx.host_allocate(4096)
    pageable = create_string_buffer(4096)
    ctx.expect(INVALID_HANDLE, ctx.free, addressof(pageable))
    ctx.expect(INVALID_HANDLE, ctx.free, device + 64)
    ctx.expect(INVALID_HANDLE, ctx.free, pinned)
    ctx.expect(INVALID_HANDLE, ctx.host_free, addressof(pageable))
    ctx.expect(INVALID_HANDLE, ctx.host_free, device)
    ctx.free(device)
    ctx.expect(INVALID_HANDLE, ctx.free, device)
    ctx.host_free(pinned)
    ctx.expect(INVALID_HANDLE, ctx.host_free, pinned)


@check
def check_null_arguments(ctx: Context) -> None:
    """A NULL where a value is needed (client, stream, event, function, pointer) is INVALID_ARGUMENT."""
    stream, event, address = ctx.stream(), ctx.event(), ctx.allocate(64)
    client = ctx.client
    uses: dict[str, Callable[[], Any]] = {
        "client_device_count": lambda: ctx.driver.call(
            "client_device_count", byref(new(TPD_Client_DeviceCount_Args, client=None))
        ),
        "client_create (name)": lambda: ctx.driver.call(
            "client_create", byref(new(TPD_Client_Create_Args, name=None))
        ),
        "device_get_properties (properties)": lambda: ctx.call("device_get_properties", device=0),
        "stream_launch_host_function (function)": lambda: ctx.call(
            "stream_launch_host_function", stream=stream
        ),
        "memory_copy_async (destination)": lambda: ctx.copy(
            stream, None, address, 64, CopyKind.DEVICE_TO_HOST
        ),
        "memory_copy_async (source)": lambda: ctx.copy(
            stream, address, None, 64, CopyKind.HOST_TO_DEVICE
        ),
        "memory_copy_async (kind 7)": lambda: ctx.copy(stream, address, address, 64, 7),  # type: ignore[arg-type]
        "memory_set_async (pointer)": lambda: ctx.memset(stream, None, 0, 64),
    }
    for name, use in {
        **_stream_uses(ctx, None, event, address),
        **_event_uses(ctx, None, stream, event),
    }.items():
        uses[f"{name} (NULL handle)"] = use
    # Without timing events, UNSUPPORTED may be found before the arguments are looked at.
    unsupported = set() if ctx.has(Capability.TIMING_EVENTS) else {ErrorCode.UNSUPPORTED}
    codes = {
        name: {INVALID_ARGUMENT} | (unsupported if "elapsed" in name else set()) for name in uses
    }
    _expect_all(ctx, uses, "a NULL argument", codes)
    ensure(ctx.client == client and ctx.device_count >= 1, "the client broke")


def _valid_arguments(ctx: Context) -> dict[str, Callable[[], Any]]:
    """For each table member returning an error: a builder of arguments it accepts."""
    timing = ctx.has(Capability.TIMING_EVENTS)
    args = ctx.arguments

    def recorded(timing: bool = False) -> int:
        event, stream = ctx.event(timing=timing), ctx.stream()
        ctx.record(event, stream)
        ctx.synchronize(stream)
        return event

    noop = TPD_HostFunction(lambda user_data, message, size: 0)
    keep_alive(noop)
    builders: dict[str, Callable[[], Any]] = {
        "error_get_code": lambda: new(TPD_Error_GetCode_Args, error=ctx.error_handle()),
        "client_create": ctx.client_create_arguments,
        "client_device_count": lambda: args("client_device_count"),
        "device_get_properties": lambda: args(
            "device_get_properties", device=0, properties=pointer(new(TPD_DeviceProperties))
        ),
        "memory_allocate": lambda: args("memory_allocate", device=0, size=64),
        "memory_free": lambda: args("memory_free", pointer=ctx.allocate(64)),
        "memory_get_info": lambda: args("memory_get_info", device=0),
        "host_memory_allocate": lambda: args("host_memory_allocate", size=64),
        "host_memory_free": lambda: args("host_memory_free", pointer=ctx.host_allocate(64)),
        "memory_set_async": lambda: args(
            "memory_set_async", stream=ctx.stream(), pointer=ctx.allocate(64), value=1, size=64
        ),
        "memory_copy_async": lambda: args(
            "memory_copy_async",
            stream=ctx.stream(),
            destination=ctx.allocate(64),
            source=ctx.allocate(64),
            size=64,
            kind=CopyKind.DEVICE_TO_DEVICE,
        ),
        "stream_create": lambda: args("stream_create", device=0, priority=0),
        "stream_destroy": lambda: args("stream_destroy", stream=ctx.stream()),
        "stream_query": lambda: args("stream_query", stream=ctx.stream()),
        "stream_synchronize": lambda: args("stream_synchronize", stream=ctx.stream()),
        "stream_wait_idle": lambda: args("stream_wait_idle", stream=ctx.stream()),
        "stream_wait_event": lambda: args(
            "stream_wait_event", stream=ctx.stream(), event=recorded()
        ),
        "stream_launch_host_function": lambda: args(
            "stream_launch_host_function", stream=ctx.stream(), function=noop
        ),
        "event_create": lambda: args("event_create", device=0),
        "event_destroy": lambda: args("event_destroy", event=ctx.event()),
        "event_record": lambda: args("event_record", event=ctx.event(), stream=ctx.stream()),
        "event_query": lambda: args("event_query", event=recorded()),
        "event_synchronize": lambda: args("event_synchronize", event=recorded()),
        "event_elapsed_time": lambda: args(
            "event_elapsed_time", start=recorded(timing), end=recorded(timing)
        ),
    }
    if not timing:
        del builders["event_elapsed_time"]  # UNSUPPORTED whatever the struct_size
    # Last: it takes the check's client.
    builders["client_destroy"] = lambda: args("client_destroy")
    return builders


def _call_sized(
    ctx: Context, member: str, args: Any, size: int
) -> tuple[DriverError | None, bytes]:
    """Calls ``member`` with ``args`` copied into a buffer whose ``struct_size`` is ``size``;
    bytes past the known struct are 0xA5 (a newer caller's members). Returns the error and
    those trailing bytes after the call."""
    known = STRUCT_SIZES[type(args)]
    buffer = (ctypes.c_ubyte * (known + 64))(*([0] * known + [0xA5] * 64))
    ctypes.memmove(buffer, byref(args), known)
    view = type(args).from_buffer(buffer)
    view.struct_size = size
    error = getattr(ctx.driver.api, member)(pointer(view))
    if member == "client_create" and not error and view.client:
        ctx.destroy_client(view.client)
    if member == "error_get_code":
        ctx.driver.take_error("(the error read)", args.error)
    return (ctx.driver.take_error(member, error) if error else None), bytes(buffer)[known:]


@check
def check_struct_size_too_small(ctx: Context) -> str:
    """Every function given a struct_size below its TPD_*_STRUCT_SIZE returns VERSION_MISMATCH."""
    builders = _valid_arguments(ctx)
    for member, build in builders.items():
        for smaller in (0, 1):
            args = build()  # afresh: a driver ignoring struct_size may have consumed the last
            size = 0 if smaller == 0 else STRUCT_SIZES[type(args)] - 1
            error, _ = _call_sized(ctx, member, args, size)
            ensure(
                error is not None and error.code is ErrorCode.VERSION_MISMATCH,
                f"{member} with struct_size {size}: expected VERSION_MISMATCH, got {error or 'success'}",
            )
    return f"{len(builders)} functions"


@check
def check_struct_size_newer_caller(ctx: Context) -> str:
    """Every function accepts a larger struct_size (a newer header's caller), ignoring and
    leaving untouched the members it does not know."""
    builders = _valid_arguments(ctx)
    for member, build in builders.items():
        args = build()
        size = STRUCT_SIZES[type(args)] + 64
        error, tail = _call_sized(ctx, member, args, size)
        if member == "client_destroy" and error is None:
            ctx.client = None
        ensure(error is None, f"{member} with struct_size {size}: {error}")
        ensure(
            tail == b"\xa5" * 64, f"{member} wrote past the members of API {API_MAJOR}.{API_MINOR}"
        )
    return f"{len(builders)} functions"
