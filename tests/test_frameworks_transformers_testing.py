"""transformers' test utilities run their tests on every device (docs/frameworks.md).

foo and npu need nothing: torchplug.integrations.transformers_testing, loaded
with transformers.testing_utils, fills its device tables and makes
torch_device torch.accelerator's device. hpu is named with a device spec file
(torchplug_testing.transformers_spec), since TRANSFORMERS_TEST_DEVICE=hpu is
refused without habana_frameworks.
"""

from __future__ import annotations

import pytest

import framework_reports as framework

pytestmark = pytest.mark.slow

runs = framework.runs_fixture("transformers_testing")


@pytest.mark.parametrize("device", framework.cases())
def test_torch_device_is_the_device_with_its_functions(
    runs: framework.FrameworkRuns, device: str
) -> None:
    outcome = runs.outcome(device, "selects")
    assert outcome["device"] == device
    assert outcome["device_count"] == outcome["expected_count"]
    assert outcome["seeds_the_device"], (
        "backend_manual_seed does not call torch.<device>.manual_seed"
    )
    assert outcome["accelerator_tests_run"], "@require_torch_accelerator skips on the device"
    assert outcome["bf16"], "@require_torch_bf16 skips on the device"
    assert outcome["fp16"], "@require_torch_fp16 skips on the device"


test_a_test_trains_like_the_cpu = framework.trains_like_the_cpu("trains")
