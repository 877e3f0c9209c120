"""Device-generic scripts find foo and npu by themselves (docs/frameworks.md).

pytorch/examples choose ``torch.accelerator.current_accelerator()``, torchtitan
``torch._utils._get_available_device_type()``; both name the PrivateUse1
device, so foo and npu need nothing, and no torchplug integration is
imported. hpu is never either's answer beside a PrivateUse1 backend.
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

HPU_NOT_FOUND = pytest.mark.xfail(
    strict=True,
    reason="torch.accelerator and torch._utils._get_available_device_type() name the "
    "PrivateUse1 device (foo) when it is active beside hpu; a script must name hpu",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> FrameworkRuns:
    return FrameworkRuns("scripts", tmp_path_factory.mktemp("scripts"))


@pytest.mark.parametrize("device", cases())
def test_import_torch_imports_no_integration(runs: FrameworkRuns, device: str) -> None:
    assert runs.outcome(device, "import_torch_loads_no_integration")["loaded"] == []


@pytest.mark.parametrize("device", cases(hpu=HPU_NOT_FOUND))
def test_examples_style_scripts_find_the_device(runs: FrameworkRuns, device: str) -> None:
    assert_on(runs.outcome(device, "examples_selects"), device)


@pytest.mark.parametrize("device", cases(hpu=HPU_NOT_FOUND))
def test_torchtitan_finds_the_device(runs: FrameworkRuns, device: str) -> None:
    assert_on(runs.outcome(device, "torchtitan_selects"), device)


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_trains_like_the_cpu(runs: FrameworkRuns, device: str) -> None:
    assert_trains_like_cpu(runs.outcome(device, "fp32"), device, FP32_TOLERANCE)


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_bf16_autocast(runs: FrameworkRuns, device: str) -> None:
    assert_mixed_precision(runs.outcome(device, "bf16"), device, "torch.bfloat16")


@pytest.mark.parametrize("device", cases(hpu=hpu_backward))
def test_fp16_autocast_with_the_devices_grad_scaler(runs: FrameworkRuns, device: str) -> None:
    assert_mixed_precision(runs.outcome(device, "fp16"), device, "torch.float16", scaled=True)
