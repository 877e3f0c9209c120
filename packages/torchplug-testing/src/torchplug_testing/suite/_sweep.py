"""Shared parametrisation of the OpInfo and ModuleInfo sweep modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from torchplug_testing import moduleinfo, opinfo
from torchplug_testing.guard import OpinfoRunner
from torchplug_testing.session import sweep_options


@dataclass(frozen=True)
class _Sweep:
    """What tells the operator sweep's tests from the module sweep's."""

    # The test's user property that the session's summary reads the figures from.
    figures_key: str
    # Prepended to the mode: how the crash guard's worker tells the sweeps apart.
    request_prefix: str
    name: Callable[[Any], str]
    limit: Callable[[torch.dtype, bool], int | None]
    # The skip reason when the CPU accepts none of the samples.
    nothing_ran: str


_OPERATORS = _Sweep(
    "opinfo_samples",
    "",
    opinfo.op_id,
    opinfo.sample_limit,
    "no sample of this operator runs on the CPU",
)
_MODULES = _Sweep(
    "module_samples",
    moduleinfo.REQUEST_PREFIX,
    moduleinfo.module_id,
    moduleinfo.input_limit,
    "the CPU runs no input of this module in this dtype",
)


def parameters(mode: str) -> list:
    dtypes, _ = sweep_options()
    return [
        pytest.param(op, dtype, id=f"{opinfo.op_id(op)}-{dtype_name(dtype)}")
        for dtype in dtypes
        for op in opinfo.operators(mode, dtype)
    ]


def run(
    mode: str,
    op,
    dtype: torch.dtype,
    device: str,
    runner: OpinfoRunner,
    request: pytest.FixtureRequest,
) -> None:
    _run(_OPERATORS, mode, op, dtype, device, runner, request)


def module_parameters(mode: str) -> list:
    """Every module of the ModuleInfo database, in each dtype it declares."""
    return [
        pytest.param(info, dtype, id=f"{moduleinfo.module_id(info)}-{dtype_name(dtype)}")
        for dtype in moduleinfo.dtypes()
        for info in moduleinfo.modules(mode, dtype)
    ]


def run_module(
    mode: str,
    info,
    dtype: torch.dtype,
    device: str,
    runner: OpinfoRunner,
    request: pytest.FixtureRequest,
) -> None:
    _run(_MODULES, mode, info, dtype, device, runner, request)


def _run(
    sweep: _Sweep,
    mode: str,
    subject: Any,
    dtype: torch.dtype,
    device: str,
    runner: OpinfoRunner,
    request: pytest.FixtureRequest,
) -> None:
    """Sweeps ``subject`` (an operator or a module) through the crash guard, records
    its figures for the session's summary, and passes, skips or fails the test."""
    _, full = sweep_options()
    result = runner.run(sweep.request_prefix + mode, subject, dtype, sweep.limit(dtype, full))
    name = sweep.name(subject)
    request.node.user_properties.append(
        (
            sweep.figures_key,
            {
                "mode": mode,
                "op": name,
                "dtype": dtype_name(dtype),
                "device": device,
                "total": result.total,
                "passed": result.passed,
                "crash": result.crash,
            },
        )
    )
    if result.skip_reason is not None:
        pytest.skip(result.skip_reason)
    if result.total == 0:
        pytest.skip(sweep.nothing_ran)
    result.raise_if_failed(f"{name} {mode} in {dtype_name(dtype)} on {device}")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
