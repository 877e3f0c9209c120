"""The device's driver library against the driver conformance checks (``torchplug/driver.h``).

A backend built on torchplug reaches its devices through a driver; every
check of :mod:`torchplug_testing.driver` is one test here, run against that
library in a child process (a crash in the driver fails the check it hit). A
backend that is not built on torchplug has no such driver: the group skips,
saying so.
"""

from __future__ import annotations

import pytest

from torchplug_testing.driver import CheckResult, Status, run_conformance
from torchplug_testing.driver.harness import CHECKS


@pytest.fixture(scope="module")
def driver_results(device: str) -> dict[str, CheckResult]:
    try:
        import torchplug
    except ImportError:
        pytest.skip(
            f"'{device}' is not served by torchplug, so it has no torchplug driver to check"
        )
    status = torchplug.statuses().get(device)
    if status is None or not status.active:
        pytest.skip(f"'{device}' is not an active torchplug backend, so it has no torchplug driver")
    # The library the backend's devices run on (Backend(driver=...), else the simulator).
    from torchplug import _C

    library = _C.driver_info(device)["library"]
    return {result.name: result for result in run_conformance(library, name=device)}


@pytest.mark.parametrize("check", list(CHECKS))
def test_driver_conformance(driver_results: dict[str, CheckResult], check: str) -> None:
    result = driver_results[check]
    if result.status is Status.SKIP:
        pytest.skip(result.detail)
    assert result.status is Status.PASS, f"{check}: {result.detail}"
