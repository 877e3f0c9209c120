"""The operator sweep's ``out=`` mode: an ``out=`` tensor on the CPU is refused, as on CUDA.

For every OpInfo operator with an ``out=`` overload, a sample's result on the
device gives the shape and dtype of CPU tensors passed as ``out=``; the call
must raise a RuntimeError naming the devices and leave the CPU tensors as they
were (PyTorch's own ``test_out`` checks the same for CUDA). One dtype per
operator: the device check does not depend on it.
"""

from __future__ import annotations

import unittest
from collections.abc import Iterator
from typing import Any

import torch
from torch.testing._internal.opinfo.core import DecorateInfo

from torchplug_testing import opinfo
from torchplug_testing.compare import to_cpu_reference

MODE = "out_device"
# The few first samples: some do not reach the device (a Python scalar input).
SAMPLES = 3
# What the host tensors hold before the call, to see that a refused call wrote nothing.
SENTINEL = 7


def dtype_for(op: Any) -> torch.dtype | None:
    """float32 where the CPU supports it, else the operator's first dtype by name."""
    supported = op.supported_dtypes("cpu")
    if opinfo.PRIMARY_DTYPE in supported:
        return opinfo.PRIMARY_DTYPE
    return min(supported, key=str, default=None)


def operators() -> list[tuple[Any, torch.dtype]]:
    """Each operator with an ``out=`` overload and the dtype it is swept in."""
    chosen = []
    for op in opinfo.op_db():
        dtype = dtype_for(op) if op.supports_out else None
        if dtype is not None:
            chosen.append((op, dtype))
    return chosen


def _host_outputs(result: Any) -> Any:
    """CPU tensors shaped like ``result`` (a tensor or a tuple of them), or None."""
    if isinstance(result, torch.Tensor):
        return torch.full_like(result, SENTINEL, device="cpu")
    if isinstance(result, tuple) and result and all(isinstance(r, torch.Tensor) for r in result):
        return tuple(torch.full_like(r, SENTINEL, device="cpu") for r in result)
    return None


def _tensors(outputs: Any) -> tuple[torch.Tensor, ...]:
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _accepted_on_cpu(op: Any, arguments: tuple, device: str, outputs: Any) -> bool:
    """Whether the sample's ``out=`` call is valid at all: the CPU takes it with
    CPU operands (some samples return what their ``out=`` overload cannot take)."""
    sample_input, args, kwargs = to_cpu_reference(arguments, device)
    scratch = tuple(o.clone() for o in _tensors(outputs))
    try:
        op(sample_input, *args, out=scratch if isinstance(outputs, tuple) else scratch[0], **kwargs)
    except Exception:
        return False
    return True


def _check_refused(op: Any, arguments: tuple, outputs: Any) -> None:
    before = [o.clone() for o in _tensors(outputs)]
    sample_input, args, kwargs = arguments
    try:
        op(sample_input, *args, out=outputs, **kwargs)
    except RuntimeError as refused:
        if "device" not in str(refused).lower():
            raise AssertionError(f"refused without naming the devices: {refused}") from refused
    else:
        raise AssertionError("an out= tensor on the CPU was accepted (CUDA raises)")
    for was, now in zip(before, _tensors(outputs), strict=True):
        if now.shape != was.shape or not torch.equal(now, was):
            raise AssertionError("a refused call wrote its out=")


def _fails_upstream(op: Any) -> bool:
    """Whether PyTorch's own OpInfo marks ``TestCommon.test_out`` as failing or
    skipped on CUDA (or on every device): the device behaves as CUDA does there."""
    return any(
        isinstance(decorator, DecorateInfo)
        and decorator.cls_name == "TestCommon"
        and decorator.test_name == "test_out"
        and decorator.device_type in (None, "cuda")
        for decorator in op.decorators
    )


def sample_outcomes(
    op: Any, device: str, dtype: torch.dtype, limit: int | None
) -> Iterator[opinfo.SampleOutcome]:
    """One outcome per sample: the device's refusal of host ``out=`` tensors."""
    for index, sample, failed in opinfo.samples(op, device, dtype, False, limit):
        if failed is not None:
            yield opinfo.SampleOutcome(index, failure=opinfo.describe(failed))
            return
        arguments = opinfo.arguments_of(sample)
        if not opinfo.involves_device(device, arguments):
            yield opinfo.SampleOutcome(index, applicable=False)
            continue
        try:
            outputs = _host_outputs(opinfo.call(op, arguments))
        except Exception:  # the forward sweep reports what fails without out=
            outputs = None
        if outputs is None or not _accepted_on_cpu(op, arguments, device, outputs):
            yield opinfo.SampleOutcome(index, applicable=False)
            continue
        try:
            _check_refused(op, arguments, outputs)
        except Exception as error:
            if _fails_upstream(op):
                raise unittest.SkipTest(
                    f"{opinfo.op_id(op)} accepts a host out= on CUDA too: PyTorch's OpInfo "
                    f"marks its TestCommon.test_out as failing ({opinfo.describe(error)})"
                ) from error
            yield opinfo.SampleOutcome(index, failure=opinfo.describe(error))
            continue
        yield opinfo.SampleOutcome(index)
