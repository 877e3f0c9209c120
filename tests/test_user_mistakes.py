"""No user mistake kills the process or computes garbage (issue 29), on foo, npu and hpu.

Every case of `user_mistakes.py` runs in a fresh interpreter per PrivateUse1
owner (foo with hpu beside it, then npu), several cases to a child, each
isolated there by try/except; a crash or a hang of the child fails the cases
it did not report. The expectations are what the CPU or CUDA does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from fresh_interpreter import ChildReports, run_python

# foo with hpu beside it, then npu, which needs PrivateUse1 to itself.
RUNS = {"foo": ["foo", "hpu"], "npu": ["npu"]}
DEVICES = ["foo", "npu", "hpu"]
INJECTED = "injected kernel failure"


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> ChildReports:
    return ChildReports("user_mistakes", tmp_path_factory.mktemp("mistakes"), timeout=1200)


def result(children: ChildReports, name: str, device: str) -> Any:
    owner = next(owner for owner, devices in RUNS.items() if device in devices)
    entry = children.entry(owner, f"{RUNS[owner]!r}", f"{name}@{device}")
    assert "unexpected" not in entry, entry["unexpected"]
    return entry["result"]


def raised(report: dict[str, Any], kind: str, *fragments: str) -> str:
    assert "raised" in report, f"expected {kind}, but the call returned {report.get('value')!r}"
    assert report["raised"] == kind, f"expected {kind}, got {report['raised']}: {report['message']}"
    for fragment in fragments:
        assert fragment in report["message"], report["message"]
    return report["message"]


@dataclass(frozen=True)
class Raises:
    """What a mistake raises at the call: the exception, fragments its message
    holds ("{device}" stands for the device under test) and fragments it must
    not hold, and what the case's report holds after the error."""

    kind: str
    fragments: tuple[str, ...]
    absent: tuple[str, ...] = ()
    after: Mapping[str, Any] = field(default_factory=dict)


# A host out= tensor: CUDA's device error, and the user's tensor keeps its memory.
HOST_OUT = Raises(
    "RuntimeError",
    ("Expected all tensors to be on the same device", "cpu", "{device}:0"),
    after={"out_after": 1.0},
)
# An operator with only a CUDA kernel: the message says how to add one, rather
# than being torch's list of the backends that have the operator.
CUDA_ONLY = Raises(
    "NotImplementedError",
    ("aten::_fused_dropout", "{device}:0", "CUDA", "torch.library.impl"),
    absent=("with arguments from the 'CPU' backend",),
)
# Overlapping memory: the CPU's error.
OVERLAP = Raises("RuntimeError", ("unsupported operation",))

RAISES = {
    "sum_into_host_out": HOST_OUT,
    "mul_into_host_out": HOST_OUT,
    # A CPU-only layout: a clear error that says what to do.
    "to_mkldnn": Raises("NotImplementedError", ("to_mkldnn", "{device}:0", "x.cpu()")),
    "cuda_only_operator": CUDA_ONLY,
    "cuda_only_operator_compiled": CUDA_ONLY,
    # record_stream on a stream the tensor's memory has no work on; the memory
    # is reused afterwards.
    "record_stream_of_another_device_index": Raises(
        "RuntimeError", ("record_stream", "{device}:0", "{device}:1"), after={"reuse": 1024.0}
    ),
    "record_stream_of_another_backend": Raises("RuntimeError", ("record_stream",)),
    # ... and nothing was written.
    "copy_into_a_shifted_view": replace(OVERLAP, after={"after": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]}),
    "copy_into_its_transpose": OVERLAP,
    "add_into_an_overlapping_out": OVERLAP,
    "queued_mul_into_an_overlapping_out": OVERLAP,
    "in_place_add_on_an_expanded_tensor": OVERLAP,
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", RAISES)
def test_a_mistake_raises_a_clear_error_at_the_call(children, name: str, device: str) -> None:
    expected = RAISES[name]
    report = result(children, name, device)
    fragments = [fragment.format(device=device) for fragment in expected.fragments]
    message = raised(report, expected.kind, *fragments)
    for fragment in expected.absent:
        assert fragment not in message, message
    for key, value in expected.after.items():
        assert report[key] == value, report


# Exceptions never cross a deleter, a destructor or a worker thread.


@pytest.mark.parametrize("device", DEVICES)
def test_memory_freed_while_recorded_on_a_busy_stream(children, device: str) -> None:
    assert result(children, "freeing_memory_recorded_on_a_busy_stream", device) == 4.0


@pytest.mark.parametrize("device", DEVICES)
def test_a_failed_kernel_survives_freeing_its_tensors_event_and_stream(
    children, device: str
) -> None:
    report = result(children, "failed_kernel_then_everything_freed", device)
    assert report["raised_at_call"] is None, report
    raised(report, "RuntimeError", INJECTED, "aten::mm")
    assert report["after"] == 3.0


@pytest.mark.parametrize("device", DEVICES)
def test_exit_with_a_failing_kernel_queued_and_an_error_unreported(device: str) -> None:
    owner = "npu" if device == "npu" else "foo"
    child = run_python(
        f"""
        import torch, torchplug.runtime
        mod = torch.{device}
        a = torch.randn(256, 256, device="{device}")
        side = mod.Stream()
        with mod.stream(side):
            mod._sleep(100)
            torchplug.runtime.inject_kernel_failures("{device}")
            try:
                product = a @ a
            except RuntimeError:
                pass
        event = mod.Event()
        event.record(side)
        del a
        """,
        timeout=300,
        TORCHPLUG_PRIVATEUSE1=owner,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert "terminate called" not in child.stderr


# Zero-byte tensors adopted as device memory.


@pytest.mark.parametrize("device", DEVICES)
def test_zero_byte_results(children, device: str) -> None:
    assert result(children, "eval_batch_norm_of_an_empty_batch", device) == {
        "shape": [0, 3],
        "device": f"{device}:0",
    }
    assert result(children, "dividing_empty_tensors", device) == {"shape": [0], "values": []}


# Overlapping memory that aliases exactly keeps working (the other overlaps: RAISES).


@pytest.mark.parametrize("device", DEVICES)
def test_exact_aliasing_keeps_working(children, device: str) -> None:
    assert result(children, "exact_aliasing_still_works", device) == {
        "a": [1.0, 4.0, 9.0, 16.0, 25.0, 36.0],
        "b": [3.0, 4.0, 5.0, 3.0, 4.0, 5.0],
    }


# Asynchronous errors surface at every synchronizing call, hpu's too.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "name",
    [
        "error_at_event_synchronize",
        "error_at_stream_synchronize",
        "error_at_device_synchronize",
        "error_at_item",
        "error_at_cpu",
    ],
)
def test_a_kernel_error_surfaces(children, name: str, device: str) -> None:
    report = result(children, name, device)
    assert report["raised_at_call"] is None, report
    raised(report, "RuntimeError", INJECTED, "aten::mm")
    if "later_sync" in report:  # reported once
        assert "value" in report["later_sync"], report


# Serialization of sparse tensors.


@pytest.mark.parametrize("device", DEVICES)
def test_a_sparse_checkpoint_loads_on_its_device(children, device: str) -> None:
    assert result(children, "sparse_checkpoint_round_trip", device) == {
        "device": f"{device}:0",
        "layout": "torch.sparse_coo",
        "dense": [[0.0, 1.0], [2.0, 0.0]],
    }


def test_every_case_is_checked() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import user_mistakes

    checked = {
        "sum_into_host_out", "mul_into_host_out", "to_mkldnn", "cuda_only_operator",
        "cuda_only_operator_compiled", "record_stream_of_another_device_index",
        "record_stream_of_another_backend", "freeing_memory_recorded_on_a_busy_stream",
        "failed_kernel_then_everything_freed", "eval_batch_norm_of_an_empty_batch",
        "dividing_empty_tensors", "copy_into_a_shifted_view", "copy_into_its_transpose",
        "add_into_an_overlapping_out", "queued_mul_into_an_overlapping_out",
        "in_place_add_on_an_expanded_tensor", "exact_aliasing_still_works",
        "error_at_event_synchronize", "error_at_stream_synchronize", "error_at_device_synchronize",
        "error_at_item", "error_at_cpu", "sparse_checkpoint_round_trip",
    }  # fmt: skip
    assert set(user_mistakes.CASES) == checked
