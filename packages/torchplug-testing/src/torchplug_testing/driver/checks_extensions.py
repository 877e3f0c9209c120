"""Checks of the optional extensions a driver offers (IPC, profiler, the simulator's controls)."""

from __future__ import annotations

import ctypes
import random
import subprocess
import sys
import time
from ctypes import byref, create_string_buffer
from typing import Any

from torchplug_testing.driver.bindings import (
    IPC_HANDLE_SIZE,
    Capability,
    CopyKind,
    ErrorCode,
    ExtensionType,
    SimulatorFault,
    TPD_Ipc_Allocate_Args,
    TPD_Ipc_Close_Args,
    TPD_Ipc_GetHandle_Args,
    TPD_Ipc_Open_Args,
    TPD_Profiler_EventTimestamp_Args,
    TPD_Simulator_Access_Args,
    TPD_Simulator_Adopt_Args,
    TPD_Simulator_InjectFault_Args,
    TPD_Simulator_Sleep_Args,
    TPD_Simulator_Stats_Args,
    TPD_Simulator_StrictMemory_Args,
    TPD_Simulator_TakeKernelFault_Args,
    new,
)
from torchplug_testing.driver.harness import Context, Skip, check, ensure

# Another process opens a handle (CUDA-like drivers refuse to open a handle in the
# process that made it, so the checks use another). "read": it reads the memory,
# writes the bytes reversed for the owner to see, and closes it (twice: the second
# must be refused); "open": it prints the error code of opening the handle, or OPENED.
IPC_PEER = """
import ctypes, sys
from ctypes import byref
from torchplug_testing.driver.bindings import (
    TPD_Ipc_Close_Args, TPD_Ipc_Open_Args, CopyKind, ErrorCode, ExtensionType, new)
from torchplug_testing.driver.harness import Context
from torchplug_testing.driver.loader import DriverError, load

library, name, options, mode, handle, size = sys.argv[1:7]
ctx = Context(load(library), name, options or None)
raw = (ctypes.c_ubyte * len(bytes.fromhex(handle))).from_buffer_copy(bytes.fromhex(handle))
opened = new(TPD_Ipc_Open_Args, client=ctx.client, device=0, handle=ctypes.addressof(raw))
try:
    ctx.driver.call_extension(ExtensionType.IPC, "ipc_open", byref(opened))
except DriverError as error:
    sys.stdout.write(error.code.name)
    sys.exit(0)
if mode == "open":
    sys.stdout.write("OPENED")
    sys.exit(0)
if opened.size < int(size):
    sys.exit(f"ipc_open mapped {opened.size} bytes of an allocation of {size}")
stream = ctx.stream()
result = ctypes.create_string_buffer(int(size))
ctx.copy(stream, result, opened.pointer, int(size), CopyKind.DEVICE_TO_HOST)
ctx.synchronize(stream)
reply = ctypes.create_string_buffer(result.raw[::-1], int(size))
ctx.copy(stream, opened.pointer, reply, int(size), CopyKind.HOST_TO_DEVICE)
ctx.synchronize(stream)
close = new(TPD_Ipc_Close_Args, client=ctx.client, pointer=opened.pointer)
ctx.driver.call_extension(ExtensionType.IPC, "ipc_close", byref(close))
try:
    ctx.driver.call_extension(ExtensionType.IPC, "ipc_close", byref(close))
    sys.exit("a second ipc_close of the same mapping succeeded")
except DriverError as error:
    if error.code is not ErrorCode.INVALID_HANDLE:
        sys.exit(f"a second ipc_close gave {error}, not INVALID_HANDLE")
ctx.destroy_stream(stream)
ctx.destroy_client(ctx.client)
sys.stdout.write(result.raw.hex())
"""


def _require(ctx: Context, kind: ExtensionType) -> None:
    if kind not in ctx.driver.extensions:
        raise Skip(f"the driver offers no {kind.name} extension")


def _ipc(ctx: Context, member: str, struct: Any, **values: Any) -> Any:
    args = new(struct, client=ctx.client, **values)
    ctx.driver.call_extension(ExtensionType.IPC, member, byref(args))
    return args


def _ipc_peer(ctx: Context, mode: str, handle: bytes, size: int) -> str:
    """What the other process (IPC_PEER in ``mode``) printed."""
    arguments = [ctx.driver.path, ctx.name, ctx.options or "", mode, handle.hex(), str(size)]
    peer = subprocess.run(
        [sys.executable, "-P", "-c", IPC_PEER, *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    ensure(
        peer.returncode == 0,
        f"the other process failed ({peer.returncode}): {peer.stderr.strip()[-2000:]}",
    )
    return peer.stdout


@check
def check_ipc_extension(ctx: Context) -> None:
    """IPC: another process opens shareable memory by its handle, reads its bytes and
    writes bytes the owner reads back; it closes the mapping once."""
    _require(ctx, ExtensionType.IPC)
    size = 65536 + 3
    pattern = random.Random(7).randbytes(size)
    address = _ipc(ctx, "ipc_allocate", TPD_Ipc_Allocate_Args, device=0, size=size).pointer
    stream, source = ctx.stream(), create_string_buffer(pattern, size)
    ctx.copy(stream, address, source, size, CopyKind.HOST_TO_DEVICE)
    ctx.synchronize(stream)
    handle = bytes(_ipc(ctx, "ipc_get_handle", TPD_Ipc_GetHandle_Args, pointer=address).handle)
    ensure(len(handle) == IPC_HANDLE_SIZE, "the handle has the wrong size")
    again = bytes(_ipc(ctx, "ipc_get_handle", TPD_Ipc_GetHandle_Args, pointer=address).handle)
    ensure(again == handle, "two handles of the same memory differ")
    read = _ipc_peer(ctx, "read", handle, size)
    ensure(bytes.fromhex(read) == pattern, f"the other process read other bytes ({read[:80]})")
    written = create_string_buffer(size)
    ctx.copy(stream, written, address, size, CopyKind.DEVICE_TO_HOST)
    ctx.synchronize(stream)
    ensure(written.raw == pattern[::-1], "the owner does not see the other process's writes")
    ctx.free(address)
    ctx.destroy_stream(stream)


@check
def check_ipc_errors(ctx: Context) -> None:
    """IPC: bytes that are no handle, a handle of freed memory, and a pointer ipc_open did
    not return are errors with a status, not crashes."""
    _require(ctx, ExtensionType.IPC)
    garbage = (ctypes.c_ubyte * IPC_HANDLE_SIZE)(*random.Random(3).randbytes(IPC_HANDLE_SIZE))
    for handle in (garbage, (ctypes.c_ubyte * IPC_HANDLE_SIZE)()):
        ctx.expect(
            (ErrorCode.INVALID_ARGUMENT, ErrorCode.INVALID_HANDLE),
            _ipc,
            ctx,
            "ipc_open",
            TPD_Ipc_Open_Args,
            device=0,
            handle=ctypes.addressof(handle),
        )
    ctx.expect(
        ErrorCode.INVALID_ARGUMENT, _ipc, ctx, "ipc_open", TPD_Ipc_Open_Args, device=0, handle=None
    )
    address = _ipc(ctx, "ipc_allocate", TPD_Ipc_Allocate_Args, device=0, size=4096).pointer
    ctx.expect(
        ErrorCode.INVALID_HANDLE, _ipc, ctx, "ipc_close", TPD_Ipc_Close_Args, pointer=address
    )
    handle = bytes(_ipc(ctx, "ipc_get_handle", TPD_Ipc_GetHandle_Args, pointer=address).handle)
    ctx.free(address)
    opened = _ipc_peer(ctx, "open", handle, 4096)
    ensure(
        opened == ErrorCode.INVALID_HANDLE.name,
        f"opening the handle of freed memory in another process gave {opened}, not INVALID_HANDLE",
    )
    ctx.expect(
        ErrorCode.INVALID_DEVICE,
        _ipc,
        ctx,
        "ipc_allocate",
        TPD_Ipc_Allocate_Args,
        device=ctx.device_count,
        size=64,
    )


@check
def check_profiler_extension(ctx: Context) -> str:
    """Profiler: event timestamps are on the host's steady clock (CLOCK_MONOTONIC), in order."""
    _require(ctx, ExtensionType.PROFILER)
    ctx.require(Capability.TIMING_EVENTS)
    stream = ctx.stream()
    first, second = ctx.event(timing=True), ctx.event(timing=True)
    before = time.monotonic_ns()
    ctx.record(first, stream)
    ctx.host_function(stream, lambda: time.sleep(0.01))
    ctx.record(second, stream)
    ctx.event_synchronize(second)
    after = time.monotonic_ns()
    stamps = []
    for event in (first, second):
        args = new(TPD_Profiler_EventTimestamp_Args, client=ctx.client, event=event)
        ctx.driver.call_extension(ExtensionType.PROFILER, "event_timestamp", byref(args))
        stamps.append(args.nanoseconds)
    ensure(
        before <= stamps[0] <= stamps[1] <= after,
        f"timestamps {stamps} are not in order within [{before}, {after}] of CLOCK_MONOTONIC",
    )
    ensure(
        stamps[1] - stamps[0] >= 5_000_000,
        f"{stamps[1] - stamps[0]} ns across a 10 ms host function",
    )
    return f"{(stamps[1] - stamps[0]) / 1e6:.1f} ms between the events"


def _simulator(ctx: Context, member: str, struct: Any, **values: Any) -> Any:
    args = new(struct, client=ctx.client, **values)
    ctx.driver.call_extension(ExtensionType.SIMULATOR, member, byref(args))
    return args


@check
def check_simulator_kernel_faults(ctx: Context) -> None:
    """Simulator: FAIL_KERNEL_LAUNCHES faults are taken by take_kernel_fault, one each, and
    leave host functions alone."""
    _require(ctx, ExtensionType.SIMULATOR)
    _simulator(
        ctx,
        "inject_fault",
        TPD_Simulator_InjectFault_Args,
        device=0,
        fault=SimulatorFault.FAIL_KERNEL_LAUNCHES,
        count=2,
    )
    stream = ctx.stream()
    ran: list[bool] = []
    ctx.host_function(stream, lambda: ran.append(True))
    ctx.synchronize(stream)
    ensure(ran == [True], "a host function failed on a FAIL_KERNEL_LAUNCHES fault")
    taken = [
        _simulator(ctx, "take_kernel_fault", TPD_Simulator_TakeKernelFault_Args, device=0).taken
        for _ in range(3)
    ]
    ensure(taken == [1, 1, 0], f"take_kernel_fault answered {taken} for 2 injected faults")
    ctx.expect(
        ErrorCode.INVALID_DEVICE,
        _simulator,
        ctx,
        "take_kernel_fault",
        TPD_Simulator_TakeKernelFault_Args,
        device=ctx.device_count,
    )
    ctx.destroy_stream(stream)


@check
def check_simulator_stats_adopt_sleep(ctx: Context) -> None:
    """Simulator: stats count allocations and adopted memory; sleep occupies a stream."""
    _require(ctx, ExtensionType.SIMULATOR)
    before = _simulator(ctx, "stats", TPD_Simulator_Stats_Args, device=0)
    address = ctx.allocate(4096)
    _simulator(ctx, "adopt", TPD_Simulator_Adopt_Args, device=0, bytes=1000, release=0)
    during = _simulator(ctx, "stats", TPD_Simulator_Stats_Args, device=0)
    ensure(
        during.used_bytes >= before.used_bytes + 4096 + 1000,
        f"used bytes {before.used_bytes} -> {during.used_bytes} after 4096 allocated and 1000 adopted",
    )
    ensure(during.initialized == 1, "a device with memory is not initialized")
    _simulator(ctx, "adopt", TPD_Simulator_Adopt_Args, device=0, bytes=1000, release=1)
    ctx.free(address)
    after = _simulator(ctx, "stats", TPD_Simulator_Stats_Args, device=0, reset_peak=1)
    ensure(after.used_bytes == before.used_bytes, "freed and released memory is still counted")
    ctx.expect(
        ErrorCode.INVALID_ARGUMENT,
        _simulator,
        ctx,
        "adopt",
        TPD_Simulator_Adopt_Args,
        device=0,
        bytes=1,
        release=7,
    )
    stream = ctx.stream()
    started = time.monotonic()
    _simulator(ctx, "sleep", TPD_Simulator_Sleep_Args, stream=stream, milliseconds=30.0)
    ensure(not ctx.idle(stream), "a stream sleeping 30 ms is idle at once")
    ctx.synchronize(stream)
    ensure(time.monotonic() - started >= 0.025, "synchronize returned before the sleep ended")
    ctx.destroy_stream(stream)


@check
def check_simulator_strict_memory(ctx: Context) -> None:
    """Simulator: strict memory can be switched and read back; access windows open and
    close once each."""
    _require(ctx, ExtensionType.SIMULATOR)
    was = _simulator(ctx, "strict_memory", TPD_Simulator_StrictMemory_Args, enable=-1).enabled
    try:
        on = _simulator(ctx, "strict_memory", TPD_Simulator_StrictMemory_Args, enable=1)
        ensure(on.enabled == 1, "strict memory did not turn on")
        address = ctx.allocate(100)
        pointers = (ctypes.c_void_p * 1)(address)
        window = _simulator(
            ctx,
            "open_access",
            TPD_Simulator_Access_Args,
            pointers=ctypes.addressof(pointers),
            pointer_count=1,
        )
        ctypes.memset(address, 7, 100)  # inside the window the host may write
        _simulator(ctx, "close_access", TPD_Simulator_Access_Args, window=window.window)
        ctx.expect(
            ErrorCode.INVALID_HANDLE,
            _simulator,
            ctx,
            "close_access",
            TPD_Simulator_Access_Args,
            window=window.window,
        )
        ctx.free(address)
    finally:
        _simulator(ctx, "strict_memory", TPD_Simulator_StrictMemory_Args, enable=was)
