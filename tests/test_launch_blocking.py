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


def test_core_suite_passes_with_launch_blocking() -> None:
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
            # Its tests watch kernels still queued after a launch, which blocking forbids.
            "--ignore",
            str(ROOT / "core" / "tests" / "test_async_execution.py"),
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
