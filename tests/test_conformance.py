"""Every backend in the workspace passes the conformance suite: no failure its file does not list."""

import json
import os
import subprocess
import sys
from importlib import metadata
from typing import Any

import pytest
import torch

from torchplug_testing import moduleinfo, opinfo

pytestmark = pytest.mark.slow

# Each backend's sampled run, per dtype; targets from the conformance brief.
MIN_OPINFO_FORWARD_PASS_RATE = 0.995
MIN_OPINFO_BACKWARD_PASS_RATE = 0.99
# hpu's backward fails as a whole on CUDA builds of torch (see its conformance.toml).
BACKWARD_UNAVAILABLE = {"hpu"}
NO_CRASH_DTYPES = ("float32", "complex64")
# The ModuleInfo sweep: every module in every dtype it declares matches the CPU.
MIN_MODULE_PASS_RATE = 1.0


def installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


DEVICES = [
    "foo",
    "hpu",
    pytest.param(
        "npu",
        marks=pytest.mark.skipif(
            not installed("torch_vnpu"), reason="torch_vnpu (device npu) is not installed"
        ),
    ),
]


class CheckRun:
    def __init__(self, result: subprocess.CompletedProcess[str], markdown: str) -> None:
        self.result = result
        self.markdown = markdown
        self.report: dict[str, Any] = json.loads(result.stdout) if result.stdout else {}


@pytest.fixture(scope="module")
def check_runs(tmp_path_factory: pytest.TempPathFactory):
    """``torchplug check DEVICE`` once per device for the whole module: it is the slow part."""
    runs: dict[str, CheckRun] = {}

    def run(device: str) -> CheckRun:
        if device not in runs:
            markdown = tmp_path_factory.mktemp(device) / f"{device}.md"
            environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPLUG_")}
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "torchplug.cli",
                    "check",
                    device,
                    "--json",
                    "--markdown",
                    str(markdown),
                ],
                env=environment,
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            runs[device] = CheckRun(result, markdown.read_text() if markdown.is_file() else "")
        return runs[device]

    return run


@pytest.mark.parametrize("device", DEVICES)
def test_backend_conforms(device: str, check_runs) -> None:
    run = check_runs(device)
    assert run.result.returncode in (0, 1), run.result.stderr[-3000:]
    report = run.report
    assert report["device"] == device
    assert report["expectations"], "the backend ships no conformance.toml"
    assert report["unexpected_failures"] == [], json.dumps(report["unexpected_failures"], indent=1)
    assert run.result.returncode == 0
    for dtype, figures in report["opinfo"]["forward"]["dtypes"].items():
        assert figures["pass_rate"] >= MIN_OPINFO_FORWARD_PASS_RATE, (dtype, figures)
    if device not in BACKWARD_UNAVAILABLE:
        for dtype, figures in report["opinfo"]["backward"]["dtypes"].items():
            assert figures["pass_rate"] >= MIN_OPINFO_BACKWARD_PASS_RATE, (dtype, figures)
    assert f"# Conformance of `{device}`" in run.markdown
    module_modes = ("forward",) if device in BACKWARD_UNAVAILABLE else moduleinfo.MODES
    for mode in module_modes:
        for dtype, figures in report["modules"][mode]["dtypes"].items():
            swept = moduleinfo.modules(mode, getattr(torch, dtype))
            assert figures["operators"] == len(swept), (mode, dtype, figures)
            assert figures["pass_rate"] >= MIN_MODULE_PASS_RATE, (mode, dtype, figures)
    module_crashes = [
        crash for crash in report["crashes"] if crash["test"].startswith("moduleinfo")
    ]
    assert module_crashes == [], json.dumps(module_crashes, indent=1)


def test_no_operator_crashes_foo_in_float32_and_complex64(check_runs) -> None:
    """Every operator of PyTorch's op_db, forward and backward, ran under the crash guard."""
    report = check_runs("foo").report
    for mode in opinfo.MODES:
        for dtype in NO_CRASH_DTYPES:
            figures = report["opinfo"][mode]["dtypes"][dtype]
            swept = opinfo.operators(mode, getattr(torch, dtype))
            assert figures["operators"] == len(swept), (mode, dtype, figures)
    crashes = [crash for crash in report["crashes"] if crash["dtype"] in NO_CRASH_DTYPES]
    assert crashes == [], json.dumps(crashes, indent=1)
