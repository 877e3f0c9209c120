"""The parent side of the framework tests: one child interpreter per framework and
device runs tests/framework_checks.py, and each test reads one check's outcome.

The tests that several frameworks share are made here, one per check: a test
module binds each to a test name (``test_x = trains_like_the_cpu("fp32")``),
and pytest collects it under that name, in that module, with that module's
``runs`` fixture (``runs = runs_fixture("hf")``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fresh_interpreter import run_python

DEVICES = ("foo", "npu", "hpu")
CHILD_TIMEOUT_SECONDS = 300
FP32_TOLERANCE = 1e-5
# bf16/fp16 losses differ from the CPU's in the last bits of a half-precision
# value (the device autocasts as CUDA does, the CPU by its own lists).
MIXED_TOLERANCE = 2e-2

HPU_BACKWARD_BLOCKED = (
    "hpu backward is blocked upstream: on PyPI's torch (a CUDA build) the autograd engine "
    "asserts (opt_ready_stream && opt_parent_stream) when HPU is not the accelerator"
)
hpu_backward = pytest.mark.xfail(strict=True, reason=HPU_BACKWARD_BLOCKED)

# What each device needs besides torchplug's integrations (docs/frameworks.md):
# npu owns PrivateUse1 only when asked; hpu is never torch.accelerator's device
# beside a PrivateUse1 backend, so it is named.
ENVIRONMENT: dict[tuple[str, str], dict[str, str]] = {
    ("hf", "hpu"): {"ACCELERATE_TORCH_DEVICE": "hpu"},
}


def cases(**marks: pytest.MarkDecorator) -> list[Any]:
    """The devices, with ``marks`` by device name (e.g. ``hpu=hpu_backward``)."""
    return [
        pytest.param(device, marks=[marks[device]] if device in marks else [], id=device)
        for device in DEVICES
    ]


class FrameworkRuns:
    """Starts the child of (framework, device) on first use and keeps its report."""

    def __init__(self, framework: str, scratch: Path) -> None:
        self.framework = framework
        self.scratch = scratch
        self._reports: dict[str, tuple[dict[str, Any], str]] = {}

    def report(self, device: str) -> tuple[dict[str, Any], str]:
        if device not in self._reports:
            path = self.scratch / f"{self.framework}-{device}.json"
            env = dict(ENVIRONMENT.get((self.framework, device), {}))
            if device == "npu":
                env["TORCHPLUG_PRIVATEUSE1"] = "npu"
            result = run_python(
                f"""
                import sys
                from pathlib import Path

                sys.path.insert(0, {str(Path(__file__).parent)!r})
                import framework_checks

                framework_checks.main({self.framework!r}, {device!r}, Path({str(path)!r}))
                """,
                timeout=CHILD_TIMEOUT_SECONDS,
                HF_HUB_OFFLINE="1",
                HF_HUB_DISABLE_PROGRESS_BARS="1",
                **env,
            )
            output = f"(exit code {result.returncode}, environment {env})\n{result.stderr[-6000:]}"
            report = json.loads(path.read_text()) if path.exists() else {}
            self._reports[device] = (report, output)
        return self._reports[device]

    def outcome(self, device: str, check: str) -> dict[str, Any]:
        """The check's outcome; fails the test with the child's error if it raised."""
        report, output = self.report(device)
        if check not in report:
            pytest.fail(f"the {self.framework} child on {device} reported no {check}:\n{output}")
        outcome = report[check]
        if outcome.get("error"):
            pytest.fail(f"{self.framework} {check} failed on {device}:\n{outcome['error']}")
        return outcome


def assert_on(outcome: dict[str, Any], device: str) -> None:
    assert outcome["device"].split(":")[0] == device, f"ran on {outcome['device']}, not on {device}"


def assert_trains_like_cpu(outcome: dict[str, Any], device: str, tolerance: float) -> None:
    assert_on(outcome, device)
    losses, cpu = outcome["losses"], outcome["cpu"]
    assert len(losses) == len(cpu) == 2, f"expected two steps: {losses} (cpu {cpu})"
    difference = max(abs(a - b) for a, b in zip(losses, cpu, strict=True))
    assert difference <= tolerance, (
        f"losses differ from the CPU's by {difference:g} (tolerance {tolerance:g}):\n"
        f"  cpu:    {cpu}\n  {device}: {losses}"
    )


def assert_mixed_precision(
    outcome: dict[str, Any], device: str, dtype: str, scaled: bool = False
) -> None:
    """Autocast reached the device (its activations are ``dtype``), fp16 with the
    device's own GradScaler, and the losses are the CPU's to half precision."""
    assert outcome["dtype"] == dtype, (
        f"activations on {device} were {outcome['dtype']}, not {dtype}"
    )
    if scaled:
        assert (outcome["scaler"] or "").split(":")[0] == device, (
            f"the GradScaler runs on {outcome['scaler']}, not on {device}"
        )
    assert_trains_like_cpu(outcome, device, MIXED_TOLERANCE)


FrameworkTest = Callable[[FrameworkRuns, str], None]


def runs_fixture(framework: str) -> Any:
    """A test module's ``runs``: its framework's children, started once per module."""

    @pytest.fixture(scope="module")
    def runs(tmp_path_factory: pytest.TempPathFactory) -> FrameworkRuns:
        return FrameworkRuns(framework, tmp_path_factory.mktemp(framework))

    return runs


def loads_only_with_the_framework(*integrations: str) -> FrameworkTest:
    """torchplug's ``integrations`` are loaded after the framework is imported, none before."""

    @pytest.mark.parametrize("device", cases())
    def test(runs: FrameworkRuns, device: str) -> None:
        report, output = runs.report(device)
        assert report.get("integrations_before_framework") == [], output
        loaded = report["integrations_after_framework"]
        assert set(integrations) <= set(loaded), f"loaded {loaded}\n{output}"

    return test


def runs_on_the_device(check: str, **marks: pytest.MarkDecorator) -> FrameworkTest:
    @pytest.mark.parametrize("device", cases(**marks))
    def test(runs: FrameworkRuns, device: str) -> None:
        assert_on(runs.outcome(device, check), device)

    return test


def trains_like_the_cpu(check: str) -> FrameworkTest:
    """``check``'s fp32 losses are the CPU's; on hpu a strict xfail (hpu_backward)."""

    @pytest.mark.parametrize("device", cases(hpu=hpu_backward))
    def test(runs: FrameworkRuns, device: str) -> None:
        assert_trains_like_cpu(runs.outcome(device, check), device, FP32_TOLERANCE)

    return test


def mixed_precision(
    check: str, dtype: str, scaled: bool = False, **marks: pytest.MarkDecorator
) -> FrameworkTest:
    """See assert_mixed_precision; ``marks`` by device besides hpu's."""

    @pytest.mark.parametrize("device", cases(hpu=hpu_backward, **marks))
    def test(runs: FrameworkRuns, device: str) -> None:
        assert_mixed_precision(runs.outcome(device, check), device, dtype, scaled)

    return test
