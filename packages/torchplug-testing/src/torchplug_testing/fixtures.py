"""Fixtures of the suite: the device under test and its device module."""

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
def _drain_device(device: str, device_module: ModuleType) -> Iterator[None]:
    """No test leaves queued work behind for the next one."""
    yield
    for index in range(device_module.device_count()):
        device_module.synchronize(index)
