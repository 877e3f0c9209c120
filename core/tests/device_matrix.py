"""The torchplug devices a core test runs on, and how npu's share gets run.

foo wins PrivateUse1 in the workspace, so npu's share of a device-parametrized
module runs in a child pytest with TORCHPLUG_PRIVATEUSE1=npu.
"""

from __future__ import annotations

import os

import pytest
import torch

from torchplug_testing.child import child_environment, run_pytest

TORCHPLUG_DEVICES = ("foo", "npu", "hpu")


def active_devices() -> list[str]:
    """The torchplug devices usable in this process."""
    return [
        name
        for name in TORCHPLUG_DEVICES
        if hasattr(torch, name) and getattr(torch, name).is_available()
    ]


# Autograd on hpu fails on CUDA builds of torch (see plugins/vhabana_frameworks/tests/test_hpu.py).
CUDA_BUILD_HPU_AUTOGRAD = pytest.mark.xfail(
    torch.backends.cuda.is_built(),
    reason="torch CUDA builds cannot run autograd on HPU",
    strict=True,
)


def with_backward(devices: list[str]) -> list:
    """`devices` as parameters of a test that runs backward: hpu's is an expected failure."""
    return [
        pytest.param(name, marks=CUDA_BUILD_HPU_AUTOGRAD) if name == "hpu" else name
        for name in devices
    ]


def rerun_as_owner(test_file: str, owner: str, timeout: float = 600) -> None:
    """Runs `test_file`'s tests for `owner` in a child process that gives it PrivateUse1."""
    if owner in active_devices():
        pytest.skip(f"{owner} is active in this process; its tests ran here")
    environment = child_environment(TORCHPLUG_PRIVATEUSE1=owner)
    arguments = [test_file, "-q", "-p", "no:xdist", "-k", owner, "-o", "addopts="]
    completed = run_pytest(arguments, environment, cwd=os.getcwd(), timeout=timeout)
    report = completed.stdout[-4000:] + completed.stderr[-2000:]
    assert completed.returncode == 0, f"({completed.status})\n{report}"
    assert " passed" in completed.stdout, report
