"""Checks of the table, clients, devices and memory."""

from __future__ import annotations

import ctypes
import itertools
from ctypes import addressof, byref, pointer, string_at

from torchplug_testing.driver.bindings import (
    API_MAJOR,
    API_MEMBERS,
    EXTENSIONS,
    STRUCT_SIZES,
    Capability,
    CopyKind,
    ErrorCode,
    ExtensionType,
    TPD_Api,
    TPD_DeviceProperties,
    TPD_Error_Destroy_Args,
    TPD_Error_GetCode_Args,
    TPD_Error_Message_Args,
    TPD_ExtensionBase,
    new,
)
from torchplug_testing.driver.harness import CheckFailure, Context, Skip, check, ensure
from torchplug_testing.driver.loader import DriverError

MiB = 1 << 20


@check
def check_api_table(ctx: Context) -> str | None:
    """TPD_GetApi's table: version, names, every member set, a well-formed extension chain."""
    api = ctx.driver.api
    ensure(ctx.driver.version[0] == API_MAJOR, f"api_version {ctx.driver.version}")
    ensure(api.struct_size >= STRUCT_SIZES[TPD_Api], f"table struct_size {api.struct_size}")
    ensure(bool(ctx.driver.name), "driver_name is NULL or empty")
    ensure(bool(ctx.driver.driver_version), "driver_version is NULL or empty")
    missing = [name for name, _, _ in API_MEMBERS if not getattr(api, name)]
    ensure(not missing, f"NULL table members: {', '.join(missing)}")
    found = []
    address, visited = api.extension_start, set()
    while address:
        ensure(address not in visited, "the extension chain loops")
        visited.add(address)
        base = TPD_ExtensionBase.from_address(address)
        ensure(base.type not in found, f"extension type {base.type} appears twice in the chain")
        found.append(base.type)
        if base.type in EXTENSIONS:
            kind = ExtensionType(base.type)
            struct, members = EXTENSIONS[kind]
            ensure(
                base.struct_size >= STRUCT_SIZES[struct],
                f"the {kind.name} extension's struct_size {base.struct_size} is less than "
                f"{struct.__name__}_STRUCT_SIZE {STRUCT_SIZES[struct]}",
            )
            extension = struct.from_address(address)
            absent = [name for name, _, _ in members if not getattr(extension, name)]
            ensure(not absent, f"NULL members of the {kind.name} extension: {', '.join(absent)}")
        address = base.next
    names = [ExtensionType(t).name if t in EXTENSIONS else str(t) for t in found]
    return f"{ctx.driver.name} {ctx.driver.driver_version}, API {ctx.driver.version}, " + (
        f"extensions: {', '.join(names)}" if names else "no extensions"
    )


@check
def check_error_accessors(ctx: Context) -> None:
    """error_get_code, error_message (NUL-terminated, message_size) and error_destroy."""
    api = ctx.driver.api
    error = ctx.error_handle()
    code = new(TPD_Error_GetCode_Args, error=error)
    failure = api.error_get_code(byref(code))
    if failure:
        raise ctx.driver.take_error("error_get_code", failure)
    ensure(code.code == ErrorCode.INVALID_DEVICE, f"code {code.code}, expected INVALID_DEVICE")
    message = new(TPD_Error_Message_Args, error=error)
    api.error_message(byref(message))
    ensure(bool(message.message), "error_message gave a NULL message")
    text = string_at(message.message)
    ensure(
        len(text) == message.message_size,
        f"message_size {message.message_size} but the message has {len(text)} bytes",
    )
    ensure(bool(text), "the error message is empty")
    api.error_destroy(byref(new(TPD_Error_Destroy_Args, error=error)))


@check
def check_client_lifecycle(ctx: Context) -> None:
    """Clients are created again after a destroy; client_destroy releases what is left."""
    ctx.destroy_client(ctx.client)
    ctx.client = None
    for _ in range(2):
        ctx.client = ctx.create_client()
        stream = ctx.stream()
        pointer_ = ctx.allocate(4096)
        ctx.host_allocate(4096)
        event = ctx.event()
        ctx.memset(stream, pointer_, 1, 4096)
        ctx.record(event, stream)
        ctx.host_function(stream, lambda: None)
        client, ctx.client = ctx.client, None
        ctx.destroy_client(client)
    ctx.client = ctx.create_client()
    ensure(ctx.device_count >= 1, "no device after the client was created again")


@check
def check_device_properties(ctx: Context) -> str:
    """At least one device; every device's properties are sane."""
    count = ctx.device_count
    ensure(count >= 1, f"client_device_count is {count}")
    notes = []
    for device in range(count):
        p = ctx.properties(device)
        raw = string_at(addressof(p) + TPD_DeviceProperties.name.offset, 64)
        ensure(b"\0" in raw, f"device {device}: name is not NUL-terminated")
        ensure(bool(p.name), f"device {device}: empty name")
        ensure(p.total_memory > 0, f"device {device}: total_memory is 0")
        alignment = p.memory_alignment
        ensure(
            alignment > 0 and alignment & (alignment - 1) == 0,
            f"device {device}: memory_alignment {alignment} is not a power of two",
        )
        ensure(
            p.stream_priority_least == 0,
            f"device {device}: stream_priority_least is {p.stream_priority_least}, not 0",
        )
        ensure(
            p.stream_priority_greatest <= p.stream_priority_least,
            f"device {device}: stream_priority_greatest {p.stream_priority_greatest} is "
            f"less urgent than stream_priority_least {p.stream_priority_least}",
        )
        capabilities = Capability(p.capabilities & sum(Capability))
        notes.append(
            f"{device}: {p.name.decode(errors='replace')}, "
            f"{p.total_memory / MiB:.0f} MiB, {capabilities!r}"
        )
    return "; ".join(notes)


@check
def check_properties_struct_size(ctx: Context) -> None:
    """A caller's smaller TPD_DeviceProperties is written only within its struct_size."""
    size = TPD_DeviceProperties.capabilities.offset  # an older caller's: name and total_memory
    buffer = (ctypes.c_ubyte * ctypes.sizeof(TPD_DeviceProperties))(
        *[0xA5] * ctypes.sizeof(TPD_DeviceProperties)
    )
    properties = TPD_DeviceProperties.from_buffer(buffer)
    properties.struct_size = size
    args = ctx.arguments("device_get_properties", device=0, properties=pointer(properties))
    error = ctx.driver.api.device_get_properties(byref(args))
    if error:
        failure = ctx.driver.take_error("device_get_properties", error)
        ensure(
            failure.code is ErrorCode.VERSION_MISMATCH,
            f"expected success or VERSION_MISMATCH, got {failure}",
        )
    ensure(
        all(byte == 0xA5 for byte in bytes(buffer)[size:]),
        f"device_get_properties wrote past the caller's struct_size {size}",
    )


@check
def check_memory_allocate(ctx: Context) -> None:
    """Allocations on every device: aligned, disjoint; size 0 gives NULL; freeing NULL works."""
    for device in range(ctx.device_count):
        alignment = ctx.properties(device).memory_alignment
        ranges = []
        for size in (1, 3, 255, 4097, MiB + 7):
            address = ctx.allocate(size, device)
            ensure(bool(address), f"memory_allocate({size}) on device {device} gave NULL")
            ensure(
                address % alignment == 0,
                f"device {device}: {address:#x} is not a multiple of memory_alignment {alignment}",
            )
            ranges.append((address, size))
        ranges.sort()
        for (a, size), (b, _) in itertools.pairwise(ranges):
            ensure(
                a + size <= b,
                f"device {device}: allocations at {a:#x} (+{size}) and {b:#x} overlap",
            )
        for address, _ in ranges:
            ctx.free(address)
        ensure(
            ctx.allocate(0, device) is None, f"memory_allocate(0) on device {device} is not NULL"
        )
    ctx.free(None)


@check
def check_memory_info(ctx: Context) -> str:
    """memory_get_info: free <= total == total_memory; an allocation lowers free, freeing restores it."""

    def info() -> tuple[int, int]:
        args = ctx.call("memory_get_info", device=0)
        return args.free_bytes, args.total_bytes

    try:
        free, total = info()
    except DriverError as error:
        if error.code is ErrorCode.UNSUPPORTED:
            raise Skip(f"memory_get_info is unsupported: {error}") from None
        raise
    ensure(free <= total, f"free_bytes {free} > total_bytes {total}")
    ensure(
        total == ctx.properties(0).total_memory,
        f"total_bytes {total} differs from the properties' total_memory {ctx.properties(0).total_memory}",
    )
    size = min(total // 4, 64 * MiB)
    address = ctx.allocate(size)
    during, _ = info()
    ensure(
        during <= free - size,
        f"free_bytes went from {free} to {during} over an allocation of {size} bytes",
    )
    ctx.free(address)
    after, _ = info()
    ensure(
        after >= during + size, f"free_bytes is {after} after freeing {size} bytes (was {during})"
    )
    return f"{free / MiB:.0f} of {total / MiB:.0f} MiB free"


@check
def check_host_memory(ctx: Context) -> None:
    """Pinned host memory: usable by the host at once; freeing NULL works."""
    for size in (1, 4097, MiB):
        address = ctx.host_allocate(size)
        ensure(bool(address), f"host_memory_allocate({size}) gave NULL")
        ctypes.memset(address, 0x5C, size)
        ensure(
            string_at(address, size) == b"\x5c" * size,
            "pinned memory did not keep what was written",
        )
        ctx.host_free(address)
    ctx.host_free(None)


@check
def check_out_of_memory(ctx: Context) -> None:
    """More than total_memory fails with OUT_OF_MEMORY, and the device works afterwards."""
    total = ctx.properties(0).total_memory
    for size in (total + 1, min(2 * total, (1 << 63) - 1)):
        ctx.expect(ErrorCode.OUT_OF_MEMORY, ctx.allocate, size)
    stream = ctx.stream()
    address = ctx.allocate(4096)
    ctx.memset(stream, address, 0x11, 4096)
    result = ctypes.create_string_buffer(4096)
    ctx.copy(stream, result, address, 4096, CopyKind.DEVICE_TO_HOST)
    ctx.synchronize(stream)
    if result.raw != b"\x11" * 4096:
        raise CheckFailure("after OUT_OF_MEMORY, a memset and copy gave the wrong bytes")
    ctx.free(address)
