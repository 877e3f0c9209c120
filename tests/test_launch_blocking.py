"""The core's suite passes with TORCHPLUG_LAUNCH_BLOCKING=1 as it does with asynchronous launches.

The rest of the session runs asynchronously (the default); this reruns the
core's tests in a child with every kernel run at launch, the debugging mode
users switch to when an asynchronous error needs its launch site.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


# Core test modules that launch no kernel through the core, or whose subject
# is asynchronous launching itself: rerunning them blocking would test nothing new.
NOT_LAUNCH_PATHS = {
    "test_async_execution.py": "watches kernels still queued after a launch, which blocking forbids",
    "test_queued_foreach.py": "watches foreach kernels still queued after a launch, which blocking forbids",
    "test_process_exit.py": "exits with kernels still queued, which blocking never leaves",
    "test_inductor_integration.py": "checks the replaced torch internals, no kernel runs",
    "test_runtime_native.py": "the simulator's runtime on its own, without torch",
    "test_simulator_driver.py": "the driver library through ctypes, without torch",
    "test_include_graph.py": "reads the C++ sources",
    "test_cli.py": "the command line's reports",
    "test_discrete_device.py": "runs under strict memory, which already launches blocking",
    "test_remote_driver.py": "the device process's start, death and end, which launching does not change",
    "test_deferred_registration.py": "when kernels are registered, in fresh interpreters; no launch order",
    "test_driver_boundary.py": "which driver a backend opens and what doctor shows of it",
    "test_distributed_errors.py": "process-group setup refused with clear errors, before any launch",
}


def test_core_suite_passes_with_launch_blocking() -> None:
    ignored = [f"--ignore={ROOT / 'core' / 'tests' / name}" for name in NOT_LAUNCH_PATHS]
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            *ignored,
            # npu reruns each module in a child: the core's launch path is the
            # same for every device, and foo and hpu take it here.
            "-k",
            "not npu_in_its_own_process",
            str(ROOT / "core" / "tests"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "TORCHPLUG_LAUNCH_BLOCKING": "1"},
        timeout=1800,
    )
    summary = child.stdout.strip().splitlines()[-1:] or [""]
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-3000:]
    assert " passed" in summary[0], summary
