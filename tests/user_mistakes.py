"""User mistakes run on a torchplug device, in a child interpreter of test_user_mistakes.py.

``main(devices, output)`` runs every case on every device in ``devices``, each
isolated by try/except, and writes the report after each case, so a crash or
a hang leaves the cases that ran before it reported and the rest missing. A
case reports ``{"raised": type name, "message": first lines}`` or
``{"value": what it computed}``, plus what it checked along the way.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import torch

import torchplug.runtime

log = logging.getLogger(__name__)

Case = Callable[[str], Any]
CASES: dict[str, Case] = {}


def case(function: Case) -> Case:
    CASES[function.__name__] = function
    return function


def module(device: str) -> Any:
    return getattr(torch, device)


def outcome(call: Callable[[], Any]) -> dict[str, Any]:
    try:
        value = call()
    except Exception as error:
        return {"raised": type(error).__name__, "message": str(error)[:2000]}
    return {"value": value}


# --- a host out= tensor -------------------------------------------------------


@case
def sum_into_host_out(device: str) -> dict[str, Any]:
    x = torch.ones(3, device=device)
    out = torch.zeros(())
    report = outcome(lambda: torch.sum(x, 0, out=out))
    # The user's tensor keeps its memory and value.
    report["out_after"] = out.add(1).item()
    return report


@case
def mul_into_host_out(device: str) -> dict[str, Any]:
    x = torch.ones(3, device=device)
    out = torch.zeros(())
    report = outcome(lambda: torch.mul(x.sum(), 2, out=out))
    report["out_after"] = out.add(1).item()
    return report


# --- CPU-only operators -------------------------------------------------------


@case
def to_mkldnn(device: str) -> dict[str, Any]:
    return outcome(lambda: torch.ones(3, device=device).to_mkldnn())


@case
def cuda_only_operator(device: str) -> dict[str, Any]:
    return outcome(lambda: torch.ops.aten._fused_dropout(torch.ones(4, device=device), 0.5))


@case
def cuda_only_operator_compiled(device: str) -> dict[str, Any]:
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch.ops.aten._fused_dropout(x, 0.5)[0] + 1)
    # With CI set, Inductor refuses to fall back to an operator that has a
    # decomposition, on every device (an assertion for PyTorch's own CI), so
    # the compile would fail before the call this case is about.
    with mock.patch.dict(os.environ):
        os.environ.pop("CI", None)
        return outcome(lambda: compiled(torch.ones(4, device=device)))


# --- record_stream ------------------------------------------------------------


@case
def record_stream_of_another_device_index(device: str) -> dict[str, Any]:
    tensors = [torch.ones(1024, device=f"{device}:0")]
    stream = torch.Stream(device=f"{device}:1")
    report = outcome(lambda: tensors[0].record_stream(stream))
    tensors.clear()  # the free that aborted the process
    module(device).synchronize()
    report["reuse"] = torch.ones(1024, device=device).sum().item()
    return report


@case
def record_stream_of_another_backend(device: str) -> dict[str, Any]:
    other = "foo" if device == "hpu" else "hpu"
    if not (hasattr(torch, other) and module(other).is_available()):
        other = "cpu"
    tensors = [torch.ones(1024, device=device)]
    stream = torch.Stream(device=other)
    report = outcome(lambda: tensors[0].record_stream(stream))
    tensors.clear()
    module(device).synchronize()
    return report


# --- exceptions that must not cross destructors, deleters, workers -----------


@case
def freeing_memory_recorded_on_a_busy_stream(device: str) -> dict[str, Any]:
    mod = module(device)
    side = mod.Stream()
    x = torch.full((256, 256), 2.0, device=device)
    with mod.stream(side):
        mod._sleep(50)
        doubled = x * 2
    x.record_stream(side)
    del x  # freed while the side stream still uses it
    torch.full((256, 256), 5.0, device=device)
    mod.synchronize()
    return doubled[0, 0].item()


@case
def failed_kernel_then_everything_freed(device: str) -> dict[str, Any]:
    mod = module(device)
    a = torch.randn(256, 256, device=device)
    a @ a  # hpu runs a signature's first product at once, to learn its result's shape
    mod.synchronize()  # before the failure is injected
    side = mod.Stream()
    raised_at_call = None
    with mod.stream(side):
        mod._sleep(50)
        torchplug.runtime.inject_kernel_failures(device)
        try:
            product = a @ a
            event = mod.Event()
            event.record()
        except RuntimeError as error:
            raised_at_call = str(error)
            product = event = None
    # Tensors, the event and the stream go before the error is reported.
    del a, product, event, side
    report = surfaced(mod.synchronize, raised_at_call)
    return {**report, "after": torch.ones(3, device=device).sum().item()}


# --- zero-byte host-to-device adoption ---------------------------------------


@case
def eval_batch_norm_of_an_empty_batch(device: str) -> dict[str, Any]:
    norm = torch.nn.BatchNorm1d(3).eval()
    on_device = norm.to(device)(torch.empty(0, 3, device=device))
    return {"shape": list(on_device.shape), "device": str(on_device.device)}


@case
def dividing_empty_tensors(device: str) -> dict[str, Any]:
    quotient = torch.empty(0, device=device) / torch.empty(0, device=device)
    return {"shape": list(quotient.shape), "values": quotient.cpu().tolist()}


# --- overlapping memory -------------------------------------------------------


@case
def copy_into_a_shifted_view(device: str) -> dict[str, Any]:
    a = torch.arange(6.0, device=device)
    report = outcome(lambda: a[1:].copy_(a[:-1]))
    report["after"] = a.cpu().tolist()
    return report


@case
def copy_into_its_transpose(device: str) -> dict[str, Any]:
    x = torch.arange(9.0, device=device).view(3, 3)
    return outcome(lambda: x.t().copy_(x))


@case
def add_into_an_overlapping_out(device: str) -> dict[str, Any]:
    a = torch.arange(6.0, device=device)
    return outcome(lambda: torch.add(a[:-1], 1, out=a[1:]))


@case
def queued_mul_into_an_overlapping_out(device: str) -> dict[str, Any]:
    a = torch.ones(40000, device=device)  # large enough to be queued
    return outcome(lambda: torch.mul(a[:-1], 2, out=a[1:]))


@case
def in_place_add_on_an_expanded_tensor(device: str) -> dict[str, Any]:
    x = torch.zeros(3, device=device)[None].expand(3, 3)
    return outcome(lambda: x.add_(1))


@case
def exact_aliasing_still_works(device: str) -> dict[str, Any]:
    a = torch.arange(6.0, device=device)
    torch.add(a, 1, out=a)
    a.mul_(a)
    a.copy_(a)
    b = torch.arange(6.0, device=device)
    b[:3].copy_(b[3:])  # disjoint views of one storage
    return {"a": a.cpu().tolist(), "b": b.cpu().tolist()}


# --- asynchronous errors ------------------------------------------------------


def failing_kernel_on_a_side_stream(device: str) -> tuple[Any, str | None]:
    """Launches a failing kernel on a side stream behind a sleep; returns the
    side stream and the message if the launch itself raised."""
    mod = module(device)
    a = torch.randn(256, 256, device=device)
    a @ a  # hpu runs a signature's first product at once, to learn its result's shape
    mod.synchronize()  # before the failure is injected
    side = mod.Stream()
    with mod.stream(side):
        mod._sleep(50)
        torchplug.runtime.inject_kernel_failures(device)
        try:
            a @ a
        except RuntimeError as error:
            return side, str(error)
    return side, None


def surfaced(call: Callable[[], Any], raised_at_call: str | None) -> dict[str, Any]:
    """The outcome of ``call``, the first call that must report a failed kernel's
    error, and the message the kernel's launch raised, or None (the
    launches are asynchronous on every device)."""
    return {**outcome(call), "raised_at_call": raised_at_call}


@case
def error_at_event_synchronize(device: str) -> dict[str, Any]:
    mod = module(device)
    side, at_call = failing_kernel_on_a_side_stream(device)
    event = mod.Event()
    event.record(side)
    report = surfaced(event.synchronize, at_call)
    return {**report, "later_sync": outcome(mod.synchronize)}


@case
def error_at_stream_synchronize(device: str) -> dict[str, Any]:
    side, at_call = failing_kernel_on_a_side_stream(device)
    return surfaced(side.synchronize, at_call)


@case
def error_at_device_synchronize(device: str) -> dict[str, Any]:
    _, at_call = failing_kernel_on_a_side_stream(device)
    return surfaced(module(device).synchronize, at_call)


def until_idle(stream: Any) -> None:
    """Waits for `stream` without synchronizing with it (which would report its error)."""
    deadline = time.monotonic() + 30
    while not stream.query() and time.monotonic() < deadline:
        time.sleep(0.005)


def error_at_host_read(device: str, read: Callable[[torch.Tensor], Any]) -> dict[str, Any]:
    """A failing kernel, then the host reads a new tensor with ``read``: the read reports the error."""
    side, at_call = failing_kernel_on_a_side_stream(device)
    until_idle(side)  # the kernel failed; nothing synchronized with its stream
    x = torch.ones(3, device=device)
    return surfaced(lambda: read(x), at_call)


@case
def error_at_item(device: str) -> dict[str, Any]:
    return error_at_host_read(device, lambda x: x.sum().item())


@case
def error_at_cpu(device: str) -> dict[str, Any]:
    return error_at_host_read(device, lambda x: x.cpu().tolist())


# --- serialization ------------------------------------------------------------


@case
def sparse_checkpoint_round_trip(device: str) -> dict[str, Any]:
    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    buffer = io.BytesIO()
    torch.save({"coo": dense.to_sparse().to(device)}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)["coo"]
    return {
        "device": str(loaded.device),
        "layout": str(loaded.layout),
        "dense": loaded.to_dense().cpu().tolist(),
    }


def main(devices: list[str], output: Path) -> None:
    report: dict[str, Any] = {}
    for device in devices:
        for name, function in CASES.items():
            key = f"{name}@{device}"
            log.info("running %s", key)
            try:
                report[key] = {"result": function(device)}
            except Exception as error:
                report[key] = {"unexpected": f"{type(error).__name__}: {str(error)[:2000]}"}
            with contextlib.suppress(RuntimeError):
                module(device).synchronize()  # leave no error to the next case
            output.write_text(json.dumps(report, default=str))
