"""The sanitizer's reports: where an operator was launched from, and what went wrong.

Stacks are captured at every launch but formatted only into a report, so the
common case (no race) pays for walking the frames and nothing more.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from types import FrameType

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchplug.sanitizer.accesses import HOST, Access, Frames, StreamKey, TensorFacts

# Frames of the sanitizer itself and of the dispatch machinery (the mode's
# entry is wrapped by dynamo's disable) say nothing about where the user
# launched an operator.
_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_FILES = frozenset(
    {
        *(str(path) for path in Path(__file__).parent.glob("*.py")),
        sys.modules[TorchDispatchMode.__module__].__file__,
        os.path.join(_TORCH_DIR, "_compile.py"),
        os.path.join(_TORCH_DIR, "_dynamo", "eval_frame.py"),
    }
)
_MAX_FRAMES = 64


class StreamRaceError(RuntimeError):
    """Two accesses to the same memory, at least one a write, that no
    synchronization orders: on a real accelerator their order, and so the
    result, depends on timing."""

    # Tracebacks name it where users import it from.
    __module__ = "torchplug.sanitizer"


def capture_stack() -> Frames:
    """The caller's frames, innermost first, without formatting anything."""
    frames = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and len(frames) < _MAX_FRAMES:
        code = frame.f_code
        if code.co_filename not in _OWN_FILES:
            frames.append((code, frame.f_lineno))
        frame = frame.f_back
    return frames


def _format_stack(frames: Frames) -> str:
    summary = traceback.StackSummary.from_list(
        [(code.co_filename, line, code.co_name, None) for code, line in reversed(frames)]
    )
    return "".join(summary.format()).rstrip() or "  (no Python frames)"


def _describe_stream(stream: StreamKey) -> str:
    if stream == HOST:
        return "the host"
    device, index, stream_id = stream
    return f"{device}:{index} stream {stream_id}"


def _describe_tensor(facts: TensorFacts) -> str:
    name, shape, dtype, device = facts
    what = name if name.startswith("result") else f"argument '{name}'"
    return f"{what} (shape [{', '.join(str(size) for size in shape)}], {dtype}, {device})"


def race_error(
    first: Access,
    stream: StreamKey,
    op: str,
    kind: str,
    tensor: TensorFacts,
    stack: Frames,
) -> StreamRaceError:
    """The report of `op`'s access on `stream` that `first` is not ordered before."""
    earlier, later = _describe_stream(first.stream), _describe_stream(stream)
    if stream == HOST:
        fix = (
            f"synchronize {earlier} before the host uses the tensor (stream.synchronize(), "
            f"an event recorded after {first.op} and its synchronize(), or "
            f"torch.{first.stream[0]}.synchronize())"
        )
    elif first.stream == HOST:
        fix = f"synchronize {later} before the host changes the tensor"
    else:
        fix = (
            f"make {later} wait for {earlier} before {op} "
            f"(later_stream.wait_stream(earlier_stream), or an event recorded on {earlier} "
            f"after {first.op} and waited on by {later}), or synchronize"
        )
    return StreamRaceError(
        f"Stream race on {_describe_tensor(tensor)}: {op} ({kind}, {later}) is not ordered after "
        f"{first.op} ({first.kind}, {earlier}); on a device the {first.kind} on {earlier} "
        f"may still be running when the {kind} on {later} starts.\n"
        f"Fix to consider: {fix}.\n\n"
        f"{op} ({kind}, {later}; {_describe_tensor(tensor)}):\n{_format_stack(stack)}\n\n"
        f"{first.op} ({first.kind}, {earlier}; {_describe_tensor(first.tensor)}):\n"
        f"{_format_stack(first.stack)}"
    )


def freed_in_use_error(access: Access, allocated_on: StreamKey, where: str) -> StreamRaceError:
    """The report of memory freed (noticed before the operator `where`) while
    `access` may still be running on another stream."""
    other = _describe_stream(access.stream)
    return StreamRaceError(
        f"Memory freed while still in use on {other}: the tensor {_describe_tensor(access.tensor)} was "
        f"allocated on {_describe_stream(allocated_on)} and freed (noticed before "
        f"{where}) while {access.op} may still {access.kind} it on {other}; the "
        f"allocator may hand the memory out again on "
        f"{_describe_stream(allocated_on)} before {other} is done with it.\n"
        f"Fix to consider: call tensor.record_stream(<{other}>) before freeing it, or "
        f"make the allocation stream wait (wait_stream / an event) for {other}, or "
        f"synchronize {other} before the tensor is freed.\n\n"
        f"Last use ({access.op}, {access.kind}, {other}):\n"
        f"{_format_stack(access.stack)}\n\n"
        f"Freed before ({where}):\n{_format_stack(capture_stack())}"
    )
