"""Real stream mistakes, each with its corrected version, on any torchplug device.

Each buggy program makes the earlier stream slow with ``torch.<device>._sleep``
(a simulated kernel queued on the current stream, as CUDA tests use
``torch.cuda._sleep``), so that once kernels run asynchronously the mistake
changes results; the stream sanitizer reports it from the program order alone.
``expected`` lists what the report must name (operators, access kinds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

SLOW_MS = 20
N = 4096


@dataclass(frozen=True)
class Bug:
    name: str
    buggy: Callable[[str], object]
    fixed: Callable[[str], object]
    expected: tuple[str, ...]
    backward: bool = False


def _module(device: str) -> ModuleType:
    return getattr(torch, device)


def _slow_input(device: str) -> torch.Tensor:
    """A tensor the current stream is still computing when the function returns."""
    _module(device)._sleep(SLOW_MS)
    return torch.ones(N, device=device) * 3


@contextmanager
def _on_slow_side_stream(m: ModuleType, join: bool = False) -> Iterator[Any]:
    """Runs the block on a new side stream, after the current stream's work so
    far and behind a slow kernel, so that what the block queues finishes late.
    With ``join``, the current stream then waits for the side stream: the fix
    of the programs whose mistake is not to."""
    side = m.Stream()
    side.wait_stream(m.current_stream())
    with m.stream(side):
        m._sleep(SLOW_MS)
        yield side
    if join:
        m.current_stream().wait_stream(side)


# 1. A side stream reads what the default stream produces, without waiting.
def missing_wait_stream(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    x = _slow_input(device)
    side = m.Stream()
    if fixed:
        side.wait_stream(m.current_stream())
    with m.stream(side):
        y = x.sum()
    m.current_stream().wait_stream(side)
    return y


# 2. A tensor made on the default stream is used on a side stream and freed:
# the allocator hands its memory to the next allocation on the default stream.
def missing_record_stream(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    x = torch.randn(N, device=device)
    with _on_slow_side_stream(m) as side:
        y = x * 2
    if fixed:
        x.record_stream(side)
    del x
    reused = torch.zeros(N, device=device)
    m.current_stream().wait_stream(side)
    return y + reused


# 3. The host reads the result of a non-blocking copy to the host before
# the copy is done.
def nonblocking_copy_read_early(device: str, fixed: bool = False) -> float:
    m = _module(device)
    x = _slow_input(device)
    host = x.to("cpu", non_blocking=True)
    if fixed:
        m.current_stream().synchronize()
    return float(host.sum())


# 4. The event meant to mark the side stream's work is recorded on the
# current (default) stream, so waiting on it orders nothing.
def event_on_wrong_stream(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    x = torch.ones(N, device=device)
    done = m.Event()
    with _on_slow_side_stream(m) as side:
        y = x * 2
        if fixed:
            done.record(side)
    if not fixed:
        done.record()
    m.current_stream().wait_event(done)
    return y + 1


# 5. An in-place update on the default stream while a side stream still reads.
def inplace_update_races_side_read(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    weights = torch.ones(N, device=device)
    with _on_slow_side_stream(m, join=fixed) as side:
        snapshot = weights * 1
    weights.add_(1)
    m.current_stream().wait_stream(side)
    return snapshot


# 6. DDP-style gradient bucketing: gradients computed on the default stream
# are copied into a flat bucket on a communication stream that never waited.
def bucket_copy_without_sync(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    m._sleep(SLOW_MS)
    grads = [torch.full((256,), float(i), device=device) for i in range(4)]
    bucket = torch.empty(4 * 256, device=device)
    comm = m.Stream()
    if fixed:
        comm.wait_stream(m.current_stream())
    with m.stream(comm):
        for i, grad in enumerate(grads):
            bucket[i * 256 : (i + 1) * 256].copy_(grad)
    m.current_stream().wait_stream(comm)
    return bucket


# 7. The event is recorded before the work it should mark.
def event_recorded_before_work(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    x = torch.ones(N, device=device)
    side = m.Stream()
    side.wait_stream(m.current_stream())
    done = m.Event()
    with m.stream(side):
        if not fixed:
            done.record()
        m._sleep(SLOW_MS)
        y = x * 2
        if fixed:
            done.record()
    m.current_stream().wait_event(done)
    return y.sum()


# 8. A side stream's result is consumed on the default stream without a wait.
def side_output_used_without_wait(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    x = torch.ones(N, device=device)
    with _on_slow_side_stream(m, join=fixed):
        y = torch.relu(x - 0.5)
    return y.mean()


# 9. The optimizer steps on a side stream (after waiting for backward) but the
# next forward on the default stream does not wait for the step.
def optimizer_step_races_forward(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(8, 64, device=device)
    model(inputs).square().mean().backward()
    with _on_slow_side_stream(m, join=fixed):
        optimizer.step()
    return model(inputs).sum()


# 10. Work queued in a stream context, then a non-blocking copy to the host
# after the block without waiting for the stream (or for the copy).
def context_exit_then_nonblocking_cpu(device: str, fixed: bool = False) -> float:
    m = _module(device)
    x = torch.ones(N, device=device)
    with _on_slow_side_stream(m, join=fixed):
        y = x * 5
    host = y.to("cpu", non_blocking=True)
    m.synchronize()
    return float(host[0])


# 11. A pinned staging buffer is refilled on the host while the previous
# non-blocking upload from it may still be reading it.
def staging_buffer_refilled_early(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    staging = torch.ones(N).pin_memory()
    m._sleep(SLOW_MS)
    first = staging.to(device, non_blocking=True)
    if fixed:
        m.current_stream().synchronize()
    staging.fill_(2)
    second = staging.to(device, non_blocking=True)
    return first + second


# 12. Two streams write one output buffer without ordering (write after write).
def two_streams_write_one_buffer(device: str, fixed: bool = False) -> torch.Tensor:
    m = _module(device)
    out = torch.empty(N, device=device)
    with _on_slow_side_stream(m, join=fixed) as side:
        out.fill_(1)
    out.fill_(2)
    m.current_stream().wait_stream(side)
    return out


def _pair(
    program: Callable[..., object],
) -> tuple[Callable[[str], object], Callable[[str], object]]:
    return (lambda device: program(device)), (lambda device: program(device, fixed=True))


def _bug(name: str, program: Callable[..., object], *expected: str, backward: bool = False) -> Bug:
    buggy, fixed = _pair(program)
    return Bug(name, buggy, fixed, expected, backward)


BUGS: list[Bug] = [
    _bug("missing_wait_stream", missing_wait_stream, "aten::sum (read", "aten::mul.Tensor (write"),
    _bug(
        "missing_record_stream",
        missing_record_stream,
        "freed while still in use",
        "aten::mul.Tensor may still read",
        "record_stream",
    ),
    _bug(
        "nonblocking_copy_read_early",
        nonblocking_copy_read_early,
        "aten::sum (read, the host)",
        "aten::_to_copy (write",
    ),
    _bug(
        "event_on_wrong_stream",
        event_on_wrong_stream,
        "aten::add.Tensor (read",
        "aten::mul.Tensor (write",
    ),
    _bug(
        "inplace_update_races_side_read",
        inplace_update_races_side_read,
        "aten::add_.Tensor (write",
        "aten::mul.Tensor (read",
    ),
    _bug(
        "bucket_copy_without_sync",
        bucket_copy_without_sync,
        "aten::copy_ (read",
        "aten::full (write",
    ),
    _bug(
        "event_recorded_before_work",
        event_recorded_before_work,
        "aten::sum (read",
        "aten::mul.Tensor (write",
    ),
    _bug(
        "side_output_used_without_wait",
        side_output_used_without_wait,
        "aten::mean (read",
        "aten::relu (write",
    ),
    _bug(
        "optimizer_step_races_forward",
        optimizer_step_races_forward,
        "aten::addmm (read",
        "add_",
        backward=True,
    ),
    _bug(
        "context_exit_then_nonblocking_cpu",
        context_exit_then_nonblocking_cpu,
        "aten::_to_copy (read",
        "aten::mul.Tensor (write",
    ),
    _bug(
        "staging_buffer_refilled_early",
        staging_buffer_refilled_early,
        "aten::fill_.Scalar (write, the host)",
        "aten::_to_copy (read",
    ),
    _bug(
        "two_streams_write_one_buffer",
        two_streams_write_one_buffer,
        "aten::fill_.Scalar (write",
        "aten::fill_.Scalar (write",
    ),
]
