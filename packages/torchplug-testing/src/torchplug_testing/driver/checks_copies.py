"""Checks of memset and copies: values round-trip, across devices, from many threads."""

from __future__ import annotations

import ctypes
import random
import threading
from ctypes import create_string_buffer, string_at

from torchplug_testing.driver.bindings import Capability, CopyKind
from torchplug_testing.driver.harness import Context, Skip, check, ensure

SIZES = (1, 7, 4099, 1 << 20)


def _pattern(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


@check
def check_copies(ctx: Context) -> None:
    """H2D, D2D, D2H (pageable and pinned host memory) and memset round-trip values."""
    stream = ctx.stream()
    for size in SIZES:
        first, second = _pattern(size, size), _pattern(size, size + 1)
        a, b = ctx.allocate(size), ctx.allocate(size)
        source = create_string_buffer(first, size)
        ctx.copy(stream, a, source, size, CopyKind.HOST_TO_DEVICE)
        ctx.copy(stream, b, a, size, CopyKind.DEVICE_TO_DEVICE)
        pageable = create_string_buffer(size)
        ctx.copy(stream, pageable, b, size, CopyKind.DEVICE_TO_HOST)
        # Pinned memory both ways, overwriting `a` after the D2D above read it.
        pinned_in, pinned_out = ctx.host_allocate(size), ctx.host_allocate(size)
        ctypes.memmove(pinned_in, second, size)
        ctx.copy(stream, a, pinned_in, size, CopyKind.HOST_TO_DEVICE)
        ctx.copy(stream, pinned_out, a, size, CopyKind.DEVICE_TO_HOST)
        # memset through an interior pointer: torch addresses storages at offsets.
        offset = 1 if size >= 3 else 0
        length = size - 2 * offset
        ctx.memset(stream, b + offset, 0x5A, length)
        set_result = create_string_buffer(size)
        ctx.copy(stream, set_result, b, size, CopyKind.DEVICE_TO_HOST)
        # D2D between interior pointers, by halves reversed.
        half = size // 2
        ctx.copy(stream, b, a + half, size - half, CopyKind.DEVICE_TO_DEVICE)
        if half:  # a copy of 0 bytes is not what this checks
            ctx.copy(stream, b + size - half, a, half, CopyKind.DEVICE_TO_DEVICE)
        swapped = create_string_buffer(size)
        ctx.copy(stream, swapped, b, size, CopyKind.DEVICE_TO_HOST)
        ctx.synchronize(stream)
        ensure(
            pageable.raw == first,
            f"{size} bytes: H2D, D2D, D2H through pageable memory changed them",
        )
        ensure(
            string_at(pinned_out, size) == second,
            f"{size} bytes: H2D, D2H through pinned memory changed them",
        )
        expected = first[:offset] + b"\x5a" * length + first[offset + length :]
        ensure(
            set_result.raw == expected,
            f"{size} bytes: memset of bytes {offset}..{offset + length} gave wrong bytes",
        )
        ensure(
            swapped.raw == second[half:] + second[:half],
            f"{size} bytes: D2D at interior pointers gave wrong bytes",
        )
        for address in (a, b):
            ctx.free(address)
        for address in (pinned_in, pinned_out):
            ctx.host_free(address)


@check
def check_host_addressable_memory(ctx: Context) -> None:
    """With HOST_ADDRESSABLE_MEMORY, the host reads and writes device pointers directly."""
    ctx.require(Capability.HOST_ADDRESSABLE_MEMORY)
    stream, size = ctx.stream(), 4096
    address = ctx.allocate(size)
    ctx.memset(stream, address, 0x3C, size)
    ctx.synchronize(stream)
    ensure(
        string_at(address, size) == b"\x3c" * size, "the host read other bytes than the memset's"
    )
    pattern = _pattern(size, 3)
    ctypes.memmove(address, pattern, size)
    result = create_string_buffer(size)
    ctx.copy(stream, result, address, size, CopyKind.DEVICE_TO_HOST)
    ctx.synchronize(stream)
    ensure(result.raw == pattern, "a D2H copy did not return what the host wrote")
    ctx.free(address)


@check
def check_peer_copy(ctx: Context) -> None:
    """With PEER_COPY and two devices, D2D copies between them in both directions."""
    if ctx.device_count < 2:
        raise Skip("fewer than two devices")
    ctx.require(Capability.PEER_COPY, 0)
    ctx.require(Capability.PEER_COPY, 1)
    size = 65537
    pattern = _pattern(size, 4)
    first, second, third = ctx.allocate(size, 0), ctx.allocate(size, 1), ctx.allocate(size, 0)
    stream, source = ctx.stream(0), create_string_buffer(pattern, size)
    ctx.copy(stream, first, source, size, CopyKind.HOST_TO_DEVICE)
    ctx.copy(stream, second, first, size, CopyKind.DEVICE_TO_DEVICE)
    ctx.copy(stream, third, second, size, CopyKind.DEVICE_TO_DEVICE)
    result = create_string_buffer(size)
    ctx.copy(stream, result, third, size, CopyKind.DEVICE_TO_HOST)
    ctx.synchronize(stream)
    ensure(result.raw == pattern, "device 0 -> 1 -> 0 copies changed the bytes")
    for address in (first, second, third):
        ctx.free(address)


@check
def check_concurrent_threads(ctx: Context) -> str:
    """Threads allocating, copying and synchronizing on their own streams at once."""
    threads, rounds = 4, 25
    start = threading.Barrier(threads, timeout=10)
    failures: list[str] = []

    def work(index: int) -> None:
        try:
            device = index % ctx.device_count
            stream = ctx.stream(device)
            start.wait()
            for round_ in range(rounds):
                size = 4096 * (index + 1) + round_
                pattern = _pattern(size, index * 1000 + round_)
                address, source = ctx.allocate(size, device), create_string_buffer(pattern, size)
                ctx.copy(stream, address, source, size, CopyKind.HOST_TO_DEVICE)
                ctx.memset(stream, address, index, 16)
                result = create_string_buffer(size)
                ctx.copy(stream, result, address, size, CopyKind.DEVICE_TO_HOST)
                event = ctx.event(device)
                ctx.record(event, stream)
                ctx.synchronize(stream)
                ctx.event_synchronize(event)
                ctx.destroy_event(event)
                if round_ % 5 == 0:
                    ctx.properties(device)
                if result.raw != bytes([index]) * 16 + pattern[16:]:
                    failures.append(f"thread {index}, round {round_}: wrong bytes")
                ctx.free(address)
            ctx.destroy_stream(stream)
        except Exception as error:
            failures.append(f"thread {index}: {type(error).__name__}: {error}")

    workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    ensure(not failures, "; ".join(failures[:3]))
    return f"{threads} threads x {rounds} rounds"
