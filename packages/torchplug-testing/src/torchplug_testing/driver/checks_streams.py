"""Checks of streams, events and host functions: ordering, completion, failures."""

from __future__ import annotations

import time
from ctypes import string_at

from torchplug_testing.driver.bindings import Capability, CopyKind, ErrorCode
from torchplug_testing.driver.harness import Context, check, ensure
from torchplug_testing.driver.loader import DriverError

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
FAILURE = "conformance: this host function fails on purpose"


@check
def check_stream_priorities(ctx: Context) -> str:
    """Streams at every advertised priority; priorities outside the range are INVALID_ARGUMENT."""
    properties = ctx.properties(0)
    greatest, least = properties.stream_priority_greatest, properties.stream_priority_least
    for priority in sorted(
        {greatest, (greatest + least) // 2, least, 0} & set(range(greatest, least + 1))
    ):
        ctx.destroy_stream(ctx.stream(0, priority))
    outside = [p for p in (greatest - 1, least + 1) if INT_MIN <= p <= INT_MAX]
    for priority in outside:
        ctx.expect(ErrorCode.INVALID_ARGUMENT, ctx.stream, 0, priority)
    return f"priorities {greatest}..{least}"


@check
def check_stream_query_synchronize_destroy(ctx: Context) -> None:
    """stream_query follows queued work; synchronize waits for it; destroy waits for it too."""
    for device in range(ctx.device_count):
        stream = ctx.stream(device)
        ensure(ctx.idle(stream), f"a new stream on device {device} is not idle")
        ctx.synchronize(stream)
        gate = ctx.gate(stream)
        ensure(not ctx.idle(stream), "a stream blocked in a host function reports idle")
        gate.set()
        ctx.synchronize(stream)
        ensure(ctx.idle(stream), "a synchronized stream is not idle")
        finished: list[bool] = []

        def slow(finished: list[bool] = finished) -> None:
            time.sleep(0.05)
            finished.append(True)

        ctx.host_function(stream, slow)
        ctx.destroy_stream(stream)
        ensure(finished == [True], "stream_destroy returned before the stream's work ran")


@check
def check_host_function_order(ctx: Context) -> None:
    """Host functions run in stream order, after the copies queued before them."""
    stream = ctx.stream()
    device, pinned = ctx.allocate(64), ctx.host_allocate(64)
    seen: list[tuple[int, int]] = []
    for index in range(40):
        ctx.memset(stream, device, index, 64)
        ctx.copy(stream, pinned, device, 64, CopyKind.DEVICE_TO_HOST)
        ctx.host_function(
            stream, lambda index=index: seen.append((index, string_at(pinned, 64)[63]))
        )
    ctx.synchronize(stream)
    ensure(not ctx.callback_errors, "; ".join(ctx.callback_errors))
    ensure(
        [index for index, _ in seen] == list(range(40)),
        f"host functions ran in the order {[i for i, _ in seen]}",
    )
    late = [(index, value) for index, value in seen if index != value]
    ensure(not late, f"host functions saw their copy's bytes not yet written: {late[:3]}")


@check
def check_cross_stream_ordering(ctx: Context) -> None:
    """Stream B waiting on an event of stream A runs after A's work before the event."""
    a, b = ctx.stream(), ctx.stream()
    flag: list[int] = []
    observed: list[list[int]] = []

    def producer() -> None:
        time.sleep(0.1)
        flag.append(1)

    ctx.host_function(a, producer)
    event = ctx.event()
    ctx.record(event, a)
    ctx.wait_event(b, event)
    ctx.host_function(b, lambda: observed.append(list(flag)))
    ctx.synchronize(b)
    ensure(observed == [[1]], "stream B's host function ran before stream A's work it waited for")
    ctx.synchronize(a)


@check
def check_events(ctx: Context) -> None:
    """Event query/synchronize/record; never recorded counts as completed and makes no wait."""
    stream = ctx.stream()
    never = ctx.event()
    ensure(ctx.completed(never), "an event never recorded is not completed")
    ctx.event_synchronize(never)
    ran: list[bool] = []
    ctx.wait_event(stream, never)
    ctx.host_function(stream, lambda: ran.append(True))
    ctx.synchronize(stream)
    ensure(ran == [True], "work after a wait on a never-recorded event did not run")

    event = ctx.event()
    # The second time, recording again must move the mark past the new work.
    for recorded in ("recorded", "recorded again"):
        gate = ctx.gate(stream)
        ctx.record(event, stream)
        ensure(
            not ctx.completed(event),
            f"an event {recorded} behind a blocked host function is completed",
        )
        gate.set()
        ctx.event_synchronize(event)
        ensure(ctx.completed(event), f"an event {recorded} is not completed after synchronize")
    for handle in (never, event):
        ctx.destroy_event(handle)


@check
def check_event_timing(ctx: Context) -> str:
    """event_elapsed_time measures stream work with TIMING_EVENTS, else is UNSUPPORTED."""
    stream = ctx.stream()
    if not ctx.has(Capability.TIMING_EVENTS):
        try:
            start, end = ctx.event(timing=True), ctx.event(timing=True)
        except DriverError as error:
            ensure(error.code is ErrorCode.UNSUPPORTED, f"expected UNSUPPORTED, got {error}")
            return "timing events refused by event_create"
        ctx.record(start, stream)
        ctx.record(end, stream)
        ctx.synchronize(stream)
        ctx.expect(
            ErrorCode.UNSUPPORTED,
            ctx.call,
            "event_elapsed_time",
            start=start,
            end=end,
        )
        return "without TIMING_EVENTS: UNSUPPORTED"
    start, end = ctx.event(timing=True), ctx.event(timing=True)
    ctx.record(start, stream)
    ctx.host_function(stream, lambda: time.sleep(0.03))
    ctx.record(end, stream)
    ctx.event_synchronize(end)
    ctx.event_synchronize(start)
    milliseconds = ctx.call("event_elapsed_time", start=start, end=end).milliseconds
    ensure(milliseconds >= 0, f"elapsed time {milliseconds} ms is negative")
    ensure(milliseconds >= 20, f"elapsed time {milliseconds:.3f} ms over a 30 ms host function")
    return f"{milliseconds:.1f} ms over a 30 ms host function"


@check
def check_host_function_failure(ctx: Context) -> None:
    """A failing host function: the next stream_synchronize is EXECUTION_FAILED with its
    message; the stream works again afterwards."""
    stream = ctx.stream()
    ctx.host_function(stream, lambda: FAILURE)
    error = ctx.expect(ErrorCode.EXECUTION_FAILED, ctx.synchronize, stream)
    ensure(
        FAILURE in error.message, f"the error's message {error.message!r} lacks the host function's"
    )
    ctx.synchronize(stream)
    ran: list[bool] = []
    address, pinned = ctx.allocate(64), ctx.host_allocate(64)
    ctx.memset(stream, address, 9, 64)
    ctx.copy(stream, pinned, address, 64, CopyKind.DEVICE_TO_HOST)
    ctx.host_function(stream, lambda: ran.append(True))
    ctx.synchronize(stream)
    ensure(
        ran == [True] and string_at(pinned, 64) == b"\x09" * 64,
        "the stream did not run work queued after the failure was reported",
    )


@check
def check_host_function_failure_event(ctx: Context) -> None:
    """event_synchronize of an event recorded after a failing host function is EXECUTION_FAILED;
    one recorded before it succeeds."""
    stream = ctx.stream()
    gate = ctx.gate(stream)
    before, after = ctx.event(), ctx.event()
    ctx.record(before, stream)
    ctx.host_function(stream, lambda: FAILURE)
    ctx.record(after, stream)
    gate.set()
    ctx.event_synchronize(before)
    error = ctx.expect(ErrorCode.EXECUTION_FAILED, ctx.event_synchronize, after)
    ensure(
        FAILURE in error.message, f"the error's message {error.message!r} lacks the host function's"
    )
    # Whether event_synchronize consumed the failure is the driver's choice; after one
    # stream_synchronize more it must be gone.
    try:
        ctx.synchronize(stream)
    except DriverError as error:
        ensure(
            error.code is ErrorCode.EXECUTION_FAILED,
            f"expected success or EXECUTION_FAILED, got {error}",
        )
    ctx.synchronize(stream)
    ctx.host_function(stream, lambda: None)
    ctx.synchronize(stream)


@check
def check_host_function_message_truncated(ctx: Context) -> None:
    """A failure message longer than the host function's buffer arrives truncated, not overflowing."""
    stream = ctx.stream()
    long = "conformance-" + "x" * 100_000
    ctx.host_function(stream, lambda: long)
    error = ctx.expect(ErrorCode.EXECUTION_FAILED, ctx.synchronize, stream)
    ensure(
        "conformance-x" in error.message,
        f"the message {error.message[:80]!r} lacks the start of the host function's",
    )
    ctx.synchronize(stream)


@check
def check_stream_wait_idle_and_failed_flag(ctx: Context) -> None:
    """stream_wait_idle waits for queued work without reporting a failure; stream_query's
    ``failed`` flags a pending failure until stream_synchronize reports it."""
    stream = ctx.stream()
    ensure(not ctx.call("stream_query", stream=stream).failed, "a new stream flags a failure")
    gate = ctx.gate(stream)
    ctx.host_function(stream, lambda: FAILURE)
    finished: list[bool] = []
    ctx.host_function(stream, lambda: finished.append(True))
    gate.set()
    waited = ctx.call("stream_wait_idle", stream=stream)
    ensure(finished == [True], "stream_wait_idle returned before the stream's work ran")
    ensure(waited.failed == 1, "stream_wait_idle does not flag the failed host function")
    ensure(
        ctx.call("stream_query", stream=stream).failed == 1, "stream_query lost the pending failure"
    )
    ctx.call("stream_wait_idle", stream=stream)  # reports nothing, consumes nothing
    error = ctx.expect(ErrorCode.EXECUTION_FAILED, ctx.synchronize, stream)
    ensure(
        FAILURE in error.message, f"the error's message {error.message!r} lacks the host function's"
    )
    ensure(not ctx.call("stream_query", stream=stream).failed, "a reported failure stays flagged")
    ctx.synchronize(stream)
    ctx.destroy_stream(stream)
