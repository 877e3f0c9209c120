"""HF accelerate and the Trainer train on every device as on the CPU (docs/frameworks.md).

foo and npu need nothing: torchplug.integrations.accelerate and .transformers,
loaded when those are imported, make them follow torch.accelerator where
they would fall back to the CPU. hpu, never torch.accelerator's device beside
a PrivateUse1 backend, is named with ACCELERATE_TORCH_DEVICE=hpu.
"""

from __future__ import annotations

import pytest

import framework_reports as framework

pytestmark = pytest.mark.slow

ACCELERATE_FP16_LIST = (
    "accelerate refuses fp16 on device types outside the fixed list in Accelerator.__init__ "
    "(xpu, cuda, npu, xla, mlu, musa, hpu, sdaa, mps), before any device is touched"
)

runs = framework.runs_fixture("hf")

test_integrations_load_only_with_the_frameworks = framework.loads_only_with_the_framework(
    "torchplug.integrations.accelerate", "torchplug.integrations.transformers"
)
test_trainer_places_the_model_on_the_device = framework.runs_on_the_device("trainer_selects")
test_trainer_trains_like_the_cpu = framework.trains_like_the_cpu("trainer_fp32")
test_trainer_bf16 = framework.mixed_precision("trainer_bf16", "torch.bfloat16")
test_trainer_fp16_with_the_devices_grad_scaler = framework.mixed_precision(
    "trainer_fp16",
    "torch.float16",
    scaled=True,
    foo=pytest.mark.xfail(strict=True, reason=ACCELERATE_FP16_LIST),
)
test_accelerate_trains_like_the_cpu = framework.trains_like_the_cpu("accelerate")
