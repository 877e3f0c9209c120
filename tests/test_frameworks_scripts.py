"""Device-generic scripts find foo and npu by themselves (docs/frameworks.md).

pytorch/examples choose ``torch.accelerator.current_accelerator()``, torchtitan
``torch._utils._get_available_device_type()``; both name the PrivateUse1
device, so foo and npu need nothing, and no torchplug integration is
imported. hpu is never either's answer beside a PrivateUse1 backend.
"""

from __future__ import annotations

import pytest

import framework_reports as framework

HPU_NOT_FOUND = pytest.mark.xfail(
    strict=True,
    reason="torch.accelerator and torch._utils._get_available_device_type() name the "
    "PrivateUse1 device (foo) when it is active beside hpu; a script must name hpu",
)

runs = framework.runs_fixture("scripts")


@pytest.mark.parametrize("device", framework.cases())
def test_import_torch_imports_no_integration(runs: framework.FrameworkRuns, device: str) -> None:
    assert runs.outcome(device, "import_torch_loads_no_integration")["loaded"] == []


test_examples_style_scripts_find_the_device = framework.runs_on_the_device(
    "examples_selects", hpu=HPU_NOT_FOUND
)
test_torchtitan_finds_the_device = framework.runs_on_the_device(
    "torchtitan_selects", hpu=HPU_NOT_FOUND
)
test_trains_like_the_cpu = framework.trains_like_the_cpu("fp32")
test_bf16_autocast = framework.mixed_precision("bf16", "torch.bfloat16")
test_fp16_autocast_with_the_devices_grad_scaler = framework.mixed_precision(
    "fp16", "torch.float16", scaled=True
)
