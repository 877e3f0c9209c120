"""Lightning's Trainer trains on every device as on the CPU (docs/frameworks.md).

torchplug.integrations.lightning, loaded when Lightning is imported, registers
an accelerator per active device, makes accelerator="auto" follow
torch.accelerator and gives a torchplug accelerator a strategy and mixed
precision on its device. foo and npu need nothing; hpu is named
(accelerator="hpu").
"""

from __future__ import annotations

import pytest

import framework_reports as framework

pytestmark = pytest.mark.slow

runs = framework.runs_fixture("lightning")

test_integration_loads_only_with_lightning = framework.loads_only_with_the_framework(
    "torchplug.integrations.lightning"
)
test_strategy_runs_on_the_device = framework.runs_on_the_device("selects")
test_an_accelerator_of_ones_own_needs_no_strategy = framework.runs_on_the_device(
    "own_accelerator_selects"
)
test_the_standalone_pytorch_lightning_too = framework.runs_on_the_device("standalone_selects")
test_trains_like_the_cpu = framework.trains_like_the_cpu("fp32")
test_bf16_mixed = framework.mixed_precision("bf16", "torch.bfloat16")
test_16_mixed_with_the_devices_grad_scaler = framework.mixed_precision(
    "fp16", "torch.float16", scaled=True
)
