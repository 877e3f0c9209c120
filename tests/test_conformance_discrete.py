"""The conformance suite on a device whose memory the host cannot address.

``dsc`` (``discrete_backend.py``) runs on the remote driver, whose device
memory lives in its device process: copies, the copying CPU fallback and the
device kernels that need no host access serve every operator. Every group runs but the OpInfo
backward and out= sweeps, to keep within the suite's budget (a run of every
group in every dtype passed the same way; the discrete checks train models
through backward on the device).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from torchplug_testing.check import run_suite

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SELECTION = "not opinfo_out and not opinfo_backward"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return run_suite(
        "dsc",
        expectations=str(HERE / "discrete_conformance.toml"),
        extra_env={
            "PYTHONPATH": path,
            "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
            "TORCHPLUG_PRIVATEUSE1": "dsc",
        },
        pytest_args=["-p", "discrete_backend", "-k", SELECTION],
        timeout=1200,
    )


def test_no_unexpected_failure_or_crash(report: dict[str, Any]) -> None:
    assert report["unexpected_failures"] == [], report["unexpected_failures"][:5]
    assert report["crashes"] == []
    assert report["newly_passing"] == []


def test_every_group_ran(report: dict[str, Any]) -> None:
    groups = report["groups"]
    for group, counts in groups.items():
        assert counts["passed"] + counts["expected_failure"] > 0, group
    assert groups["moduleinfo_backward"]["passed"] >= 200
    figures = report["opinfo"]["forward"]
    assert figures["samples_passed"] >= 0.99 * figures["samples"]


def test_the_fallback_report_counts_the_copies(report: dict[str, Any]) -> None:
    rows = {row["operator"]: row for row in report["fallback"]}
    assert rows["aten::uniform_"]["calls"] > 0
    assert rows["aten::uniform_"]["bytes"] > 0
