"""Fixtures of the suite: the device under test and its device module.

A backend's own tests use them too: its ``conftest.py`` imports the fixtures
it wants from here and defines ``device`` (e.g. with ``require_device``).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
import torch

from torchplug_testing import guard
from torchplug_testing.session import DEVICE_KEY


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    """The device type under test, e.g. ``"foo"``."""
    return pytestconfig.stash[DEVICE_KEY]


@pytest.fixture(scope="session")
def device_module(device: str) -> ModuleType:
    """``torch.<device>``, found the way torch itself finds it."""
    return torch.get_device_module(device)


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
def second_device(device: str, device_module: ModuleType) -> torch.device:
    """Index 1 of the device type; skips when the backend exposes one device only."""
    if device_module.device_count() < 2:
        pytest.skip(f"needs 2 '{device}' devices, {device_module.device_count()} present")
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
    """Waits for the work queued on every device of the type ``device``, if it is available."""
    module = torch.get_device_module(device)
    if module.is_available():
        for index in range(module.device_count()):
            module.synchronize(index)


def require_device(device: str, why_not: str) -> str:
    """``device`` if its backend is available in this process; fails the test with
    ``why_not`` otherwise."""
    if not hasattr(torch, device) or not torch.get_device_module(device).is_available():
        pytest.fail(why_not)
    return device
