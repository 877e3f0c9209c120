"""Shared parametrisation of the OpInfo and ModuleInfo sweep modules."""

from __future__ import annotations

import pytest
import torch

from torchplug_testing import moduleinfo, opinfo
from torchplug_testing.guard import OpinfoRunner
from torchplug_testing.session import sweep_options


def parameters(mode: str) -> list:
    dtypes, _ = sweep_options()
    return [
        pytest.param(op, dtype, id=f"{opinfo.op_id(op)}-{str(dtype).removeprefix('torch.')}")
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
    _, full = sweep_options()
    result = runner.run(mode, op, dtype, opinfo.sample_limit(dtype, full))
    request.node.user_properties.append(
        (
            "opinfo_samples",
            {
                "mode": mode,
                "op": opinfo.op_id(op),
                "dtype": str(dtype).removeprefix("torch."),
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
        pytest.skip("no sample of this operator runs on the CPU")
    result.raise_if_failed(
        f"{opinfo.op_id(op)} {mode} in {str(dtype).removeprefix('torch.')} on {device}"
    )


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
    _, full = sweep_options()
    result = runner.run(
        moduleinfo.REQUEST_PREFIX + mode, info, dtype, moduleinfo.input_limit(dtype, full)
    )
    name = moduleinfo.module_id(info)
    request.node.user_properties.append(
        (
            "module_samples",
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
        pytest.skip("the CPU runs no input of this module in this dtype")
    result.raise_if_failed(f"{name} {mode} in {dtype_name(dtype)} on {device}")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
