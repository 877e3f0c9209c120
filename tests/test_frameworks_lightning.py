"""Lightning's Trainer trains on every device as on the CPU (docs/frameworks.md).

torchplug.integrations.lightning, loaded when Lightning is imported, registers
an accelerator per active device, makes accelerator="auto" follow
torch.accelerator and gives a torchplug accelerator a strategy and mixed
precision on its device. foo and npu need nothing; hpu is named
(accelerator="hpu").
"""

from __future__ import annotations

import pytest

from framework_reports import (
    FP32_TOLERANCE,
    FrameworkRuns,
    assert_mixed_precision,
    assert_on,
    assert_trains_like_cpu,
    cases,
    hpu_backward,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> FrameworkRuns:
    return FrameworkRuns("lightning", tmp_path_factory.mktemp("lightning"))


@pytest.mark.parametrize("device", cases())
def test_integration_loads_only_with_lightning(runs: FrameworkRuns, device: str) -> None:
    report, output = runs.report(device)
    assert report.get("integrations_before_framework") == [], output
    assert "torchplug.integrations.lightning" in report["integrations_after_framework"], output


@pytest.mark.parametrize("device", cases())
def test_strategy_runs_on_the_device(runs: FrameworkRuns, device: str) -> None:
    assert_on(runs.outcome(device, "selects"), device)


@pytest.mark.parametrize("device", cases())
def test_an_accelerator_of_ones_own_needs_no_strategy(runs: FrameworkRuns, device: str) -> None:
    assert_on(runs.outcome(device, "own_accelerator_selects"), device)


@pytest.mark.parametrize("device", cases())
def test_the_standalone_pytorch_lightning_too(runs: FrameworkRuns, device: str) -> None:
    assert_on(runs.outcome(device, "standalone_selects"), device)


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_trains_like_the_cpu(runs: FrameworkRuns, device: str) -> None:
    assert_trains_like_cpu(runs.outcome(device, "fp32"), device, FP32_TOLERANCE)


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_bf16_mixed(runs: FrameworkRuns, device: str) -> None:
    assert_mixed_precision(runs.outcome(device, "bf16"), device, "torch.bfloat16")


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_16_mixed_with_the_devices_grad_scaler(runs: FrameworkRuns, device: str) -> None:
    assert_mixed_precision(runs.outcome(device, "fp16"), device, "torch.float16", scaled=True)
