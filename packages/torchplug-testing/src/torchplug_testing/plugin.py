"""The pytest plugin: ``pytest --device NAME`` runs the conformance suite on NAME.

Registered through the ``pytest11`` entry point, so it is loaded by every pytest
run in an environment where torchplug-testing is installed; without a device it
does nothing (and imports nothing heavy).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from torchplug_testing import DEVICE_ENV, EXPECTATIONS_ENV

SUITE_DIR = (Path(__file__).parent / "suite").resolve()
# Every family of dtypes the CPU kernels have: floating, complex, integral,
# boolean and the reduced-precision ones (backward runs in the differentiable ones).
OPINFO_DTYPES = "float32,float64,complex64,int64,bool,bfloat16,float16"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "device conformance suite (torchplug-testing)")
    group.addoption(
        "--device",
        default=None,
        help=f"run the conformance suite against this device type, e.g. foo (env {DEVICE_ENV})",
    )
    group.addoption(
        "--full",
        action="store_true",
        help="every OpInfo sample (default: a fixed sample of each operator that fits the time budget)",
    )
    group.addoption(
        "--expectations",
        default=None,
        help=f"the backend's expectation file of known failures (env {EXPECTATIONS_ENV}; "
        "default: the file the backend ships through its entry point)",
    )
    group.addoption(
        "--dtypes",
        default=OPINFO_DTYPES,
        help=f"comma-separated dtypes of the OpInfo sweep (default: {OPINFO_DTYPES})",
    )
    group.addoption(
        "--conformance-report", default=None, help="write the JSON conformance report here"
    )
    group.addoption(
        "--no-crash-guard",
        action="store_true",
        help="run OpInfo operators in the test process (for debuggers): a kernel that crashes "
        "then ends the run instead of failing its test",
    )
    group.addoption(
        "--op-timeout",
        type=float,
        default=120.0,
        help="seconds an OpInfo sample may run before the crash guard reports it as hung "
        "(default: 120)",
    )
    # The crash guard's worker process: the file descriptors it serves requests on.
    group.addoption("--opinfo-worker", default=None, help=argparse.SUPPRESS)


def pytest_configure(config: pytest.Config) -> None:
    device = config.getoption("device") or os.environ.get(DEVICE_ENV)
    if not device:
        return
    from torchplug_testing import fixtures
    from torchplug_testing.session import ConformanceSession

    session = ConformanceSession.start(config, device)
    config.pluginmanager.register(session, "torchplug_testing.session")
    config.pluginmanager.register(fixtures, "torchplug_testing.fixtures")
    channel = config.getoption("opinfo_worker")
    if channel:
        from torchplug_testing.guard import Worker

        config.pluginmanager.register(Worker(session.device, channel), "torchplug_testing.worker")
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        # `pytest --device foo` with no paths: run the suite, not the project's tests.
        config.args = [str(SUITE_DIR)]


def pytest_report_header(config: pytest.Config) -> str | None:
    session = config.pluginmanager.get_plugin("torchplug_testing.session")
    return None if session is None else session.header()
