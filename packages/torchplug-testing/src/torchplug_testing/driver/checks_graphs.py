"""Checks of the graph-capture extension: a stream's work is recorded without
running, each launch of the graph runs it again, and misuse fails with a status."""

from __future__ import annotations

from ctypes import byref, create_string_buffer
from typing import Any

from torchplug_testing.driver.bindings import (
    CopyKind,
    ErrorCode,
    ExtensionType,
    TPD_Graph_BeginCapture_Args,
    TPD_Graph_Destroy_Args,
    TPD_Graph_EndCapture_Args,
    TPD_Graph_Launch_Args,
    new,
)
from torchplug_testing.driver.harness import Context, Skip, check, ensure


def _graphs(ctx: Context, member: str, struct_type: Any, **values: Any) -> Any:
    if ExtensionType.GRAPH_CAPTURE not in ctx.driver.extensions:
        raise Skip("the driver offers no GRAPH_CAPTURE extension")
    args = new(struct_type, client=ctx.client, **values)
    ctx.driver.call_extension(ExtensionType.GRAPH_CAPTURE, member, byref(args))
    return args


def _read(ctx: Context, stream: int, pointer: int, size: int) -> bytes:
    result = create_string_buffer(size)
    ctx.copy(stream, result, pointer, size, CopyKind.DEVICE_TO_HOST)
    ctx.synchronize(stream)
    return result.raw


@check
def check_graph_capture(ctx: Context) -> None:
    """What a stream queues while capturing is recorded, not run; each launch of the
    graph runs it, in order, on the stream it is launched on; host functions replay."""
    size = 256
    capturing, other = ctx.stream(), ctx.stream()
    pointer = ctx.allocate(size)
    ctx.memset(capturing, pointer, 1, size)
    ctx.synchronize(capturing)
    calls: list[int] = []
    _graphs(ctx, "begin_capture", TPD_Graph_BeginCapture_Args, stream=capturing)
    ctx.memset(capturing, pointer, 7, size // 2)
    ctx.host_function(capturing, lambda: calls.append(1))
    ended = _graphs(ctx, "end_capture", TPD_Graph_EndCapture_Args, stream=capturing)
    ensure(ended.graph is not None, "end_capture returned no graph")
    ensure(ended.work_count == 2, f"the capture recorded {ended.work_count} work items, not 2")
    ensure(_read(ctx, capturing, pointer, size) == bytes([1]) * size, "the capture ran the memset")
    ensure(not calls, "the capture ran the host function")
    ctx.memset(other, pointer, 3, size)
    ctx.synchronize(other)
    for _ in range(2):
        _graphs(ctx, "graph_launch", TPD_Graph_Launch_Args, graph=ended.graph, stream=other)
    expected = bytes([7]) * (size // 2) + bytes([3]) * (size // 2)
    ensure(_read(ctx, other, pointer, size) == expected, "a launch did not run the recorded memset")
    ensure(calls == [1, 1], f"two launches ran the host function {len(calls)} times")
    _graphs(ctx, "graph_destroy", TPD_Graph_Destroy_Args, graph=ended.graph)
    ctx.free(pointer)
    for stream in (capturing, other):
        ctx.destroy_stream(stream)


@check
def check_graph_capture_errors(ctx: Context) -> None:
    """Beginning a capture twice, ending one never begun, synchronizing a capturing
    stream and launching a destroyed graph are refused; the stream works afterwards."""
    stream = ctx.stream()
    ctx.expect(ErrorCode.INVALID_ARGUMENT, _graphs, ctx, "end_capture", TPD_Graph_EndCapture_Args,
               stream=stream)  # fmt: skip
    _graphs(ctx, "begin_capture", TPD_Graph_BeginCapture_Args, stream=stream)
    ctx.expect(ErrorCode.INVALID_ARGUMENT, _graphs, ctx, "begin_capture", TPD_Graph_BeginCapture_Args,
               stream=stream)  # fmt: skip
    ctx.expect(ErrorCode.INVALID_ARGUMENT, ctx.synchronize, stream)
    graph = _graphs(ctx, "end_capture", TPD_Graph_EndCapture_Args, stream=stream).graph
    _graphs(ctx, "graph_destroy", TPD_Graph_Destroy_Args, graph=graph)
    ctx.expect(ErrorCode.INVALID_HANDLE, _graphs, ctx, "graph_launch", TPD_Graph_Launch_Args, graph=graph,
               stream=stream)  # fmt: skip
    ctx.synchronize(stream)
    ctx.destroy_stream(stream)
