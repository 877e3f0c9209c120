"""HF accelerate and the Trainer train on every device as on the CPU (docs/frameworks.md).

foo and npu need nothing: torchplug.integrations.accelerate and .transformers,
loaded when those are imported, make them follow torch.accelerator where
they would fall back to the CPU. hpu, never torch.accelerator's device beside
a PrivateUse1 backend, is named with ACCELERATE_TORCH_DEVICE=hpu.
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

ACCELERATE_FP16_LIST = (
    "accelerate refuses fp16 on device types outside the fixed list in Accelerator.__init__ "
    "(xpu, cuda, npu, xla, mlu, musa, hpu, sdaa, mps), before any device is touched"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> FrameworkRuns:
    return FrameworkRuns("hf", tmp_path_factory.mktemp("hf"))


@pytest.mark.parametrize("device", cases())
def test_integrations_load_only_with_the_frameworks(runs: FrameworkRuns, device: str) -> None:
    report, output = runs.report(device)
    assert report.get("integrations_before_framework") == [], output
    assert {"torchplug.integrations.accelerate", "torchplug.integrations.transformers"} <= set(
        report["integrations_after_framework"]
    ), output


@pytest.mark.parametrize("device", cases())
def test_trainer_places_the_model_on_the_device(runs: FrameworkRuns, device: str) -> None:
    assert_on(runs.outcome(device, "trainer_selects"), device)


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_trainer_trains_like_the_cpu(runs: FrameworkRuns, device: str) -> None:
    assert_trains_like_cpu(runs.outcome(device, "trainer_fp32"), device, FP32_TOLERANCE)


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_trainer_bf16(runs: FrameworkRuns, device: str) -> None:
    assert_mixed_precision(runs.outcome(device, "trainer_bf16"), device, "torch.bfloat16")


@pytest.mark.parametrize(
    "device",
    cases(foo=pytest.mark.xfail(strict=True, reason=ACCELERATE_FP16_LIST), hpu=hpu_backward),
)
def test_trainer_fp16_with_the_devices_grad_scaler(runs: FrameworkRuns, device: str) -> None:
    outcome = runs.outcome(device, "trainer_fp16")
    assert_mixed_precision(outcome, device, "torch.float16", scaled=True)


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_accelerate_trains_like_the_cpu(runs: FrameworkRuns, device: str) -> None:
    assert_trains_like_cpu(runs.outcome(device, "accelerate"), device, FP32_TOLERANCE)
