"""torchplug-bench: the benchmarks of the ``torchplug bench`` command, and the
model zoo they share with torchplug's tests.

Every figure is a ratio of the device's value to a baseline's measured in the
same run (the CPU, a host ``memcpy``, ``import torch`` without backends), in
interleaved rounds, from the same work on both sides: the same optimizer
implementation, each side's own device synchronised before its clock stops.
The rows and their targets are :mod:`torchplug_bench.targets`.

:func:`run` measures pinned to one core and unpinned, each in a fresh
interpreter (:mod:`torchplug_bench.measure`), and reports both side by side.
Nothing imports this package but the command and tests: ``import torch``
(autoload) never does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from torchplug_bench.report import PINNINGS, Report
from torchplug_bench.targets import BENCHMARKS, planned_rows

__all__ = ["BENCHMARKS", "PINNINGS", "Report", "run"]


def run(
    device: str | None, only: list[str], rounds: int, pinnings: list[str] | tuple[str, ...]
) -> Report:
    """Measures the rows of the benchmarks in ``only`` once per pinning."""
    measurements: dict[str, dict[str, Any]] = {}
    for pinning in pinnings:
        measurements[pinning] = _measure_in_child(device, only, rounds, pin=pinning == "pinned")
        device = device or measurements[pinning].get("device")
    return Report.from_measurements(planned_rows(only), rounds, measurements)


def _measure_in_child(
    device: str | None, only: list[str], rounds: int, pin: bool
) -> dict[str, Any]:
    import torchplug

    environment = dict(os.environ)
    device_type = device.split(":")[0] if device else None
    if device_type in torchplug.privateuse1_candidates():
        # That backend must own PrivateUse1 in the measuring process, whichever is the default.
        environment["TORCHPLUG_PRIVATEUSE1"] = device_type
    command = [sys.executable, "-m", "torchplug_bench.measure"]
    command += ["--only", ",".join(only), "--rounds", str(rounds)]
    command += (["--device", device] if device else []) + (["--pin"] if pin else [])
    # stderr is the terminal's: what failed, and why, shows as it happens.
    completed = subprocess.run(
        command, stdout=subprocess.PIPE, text=True, env=environment, check=False
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        return {
            "device": device,
            "error": f"the measuring process exited with status {completed.returncode}",
        }
    return json.loads(lines[-1])
