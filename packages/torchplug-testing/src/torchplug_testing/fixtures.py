"""Fixtures of the suite: the device under test and its device module.

A backend's own tests use them too: its ``conftest.py`` imports the fixtures
it wants from here and defines ``device`` (e.g. with ``require_device``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from torchplug_testing import device_api, guard
from torchplug_testing.session import DEVICE_KEY, SUITE_DIR


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    """The device type under test, e.g. ``"foo"``."""
    return pytestconfig.stash[DEVICE_KEY]


@pytest.fixture
def device_module(device: str, request: pytest.FixtureRequest) -> device_api.DeviceModule:
    """``torch.<device>``, found the way torch itself finds it. A function the backend
    lacks fails the test that uses it, naming the function and the test's group."""
    path = Path(str(request.node.path)).resolve()
    group = path.stem if path.parent == SUITE_DIR else None
    return device_api.DeviceModule(device, group)


@pytest.fixture(scope="session")
def opinfo_runner(pytestconfig: pytest.Config, device: str) -> Iterator[guard.OpinfoRunner]:
    """Runs the OpInfo sweeps: in the crash guard's worker process unless ``--no-crash-guard``."""
    if pytestconfig.getoption("no_crash_guard"):
        runner: guard.OpinfoRunner = guard.InProcessRunner(device)
    else:
        runner = guard.CrashGuard.for_pytest(pytestconfig, pytestconfig.getoption("op_timeout"))
    yield runner
    runner.close()


@pytest.fixture
def second_device(device: str) -> torch.device:
    """Index 1 of the device type; skips when the backend exposes one device only."""
    count = device_api.device_count(device)
    if count is None:
        pytest.skip(
            f"needs 2 '{device}' devices; how many there are is unknown: torch.{device}."
            "device_count is missing and the device is not torch.accelerator's"
        )
    if count < 2:
        pytest.skip(f"needs 2 '{device}' devices, {count} present")
    return torch.device(device, 1)


@pytest.fixture(autouse=True)
def _drain_device(device: str) -> Iterator[None]:
    """No test leaves queued work behind for the next one.

    Takes ``device`` alone, so that it drains the device of a test parametrized
    over devices as well as the session's.
    """
    yield
    synchronize(device)


def synchronize(device: str) -> None:
    """Waits for the work queued on every device of the type ``device``, if it is available
    (see :func:`torchplug_testing.device_api.synchronize`)."""
    device_api.synchronize(device)


def require_device(device: str, why_not: str) -> str:
    """``device`` if its backend is available in this process; fails the test with
    ``why_not`` otherwise."""
    if not device_api.is_available(device):
        pytest.fail(why_not)
    return device
