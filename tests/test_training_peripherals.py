"""Training peripherals and the tied-weights class of bugs, on every device as on the CPU.

The checks live in tests/zoo_peripherals.py. They run in this process on the
backends active here; a PrivateUse1 backend that lost the key to another
(``npu`` beside ``foo`` in the workspace) runs all of them once in a child
process with ``TORCHPLUG_PRIVATEUSE1`` set, and each test reads its outcome.
On ``hpu`` the checks that need backward are a strict expected failure.
"""

from __future__ import annotations

from typing import Any

import pytest
import zoo_peripherals

import torchplug
from fresh_interpreter import ChildReports
from torchplug.backend import BackendState

DEVICES = ("foo", "npu", "hpu")
CHILD_TIMEOUT_SECONDS = 600

HPU_BACKWARD_BLOCKED = (
    "hpu backward is blocked upstream: on PyPI's torch (a CUDA build) the autograd engine "
    "asserts (opt_ready_stream && opt_parent_stream) when HPU is not the accelerator"
)


@pytest.fixture(scope="module")
def child_outcomes(tmp_path_factory: pytest.TempPathFactory) -> ChildReports:
    """Every check, run once per device in a child that activates that backend."""
    scratch = tmp_path_factory.mktemp("peripherals")
    return ChildReports("zoo_peripherals", scratch, CHILD_TIMEOUT_SECONDS)


def cases() -> list[Any]:
    hpu_backward = pytest.mark.xfail(strict=True, reason=HPU_BACKWARD_BLOCKED)
    return [
        pytest.param(
            name,
            device,
            id=f"{name}-{device}",
            marks=hpu_backward if device == "hpu" and check.backward else (),
        )
        for name, check in zoo_peripherals.CHECKS.items()
        for device in DEVICES
    ]


@pytest.mark.parametrize(("name", "device"), cases())
def test_matches_cpu(name: str, device: str, child_outcomes: ChildReports) -> None:
    status = torchplug.statuses().get(device)
    if status is None:
        pytest.skip(f"no installed backend provides {device}")
    if status.state is BackendState.ACTIVE:
        zoo_peripherals.CHECKS[name].run(device)
    elif status.state is BackendState.LOST_PRIVATEUSE1:
        checks = f"{device!r}, {list(zoo_peripherals.CHECKS)!r}"
        error = child_outcomes.entry(device, checks, name)["error"]
        assert error is None, f"[in a child process with {device} active]\n{error}"
    else:
        pytest.fail(f"the {device} backend is not usable: {status.reason}")
