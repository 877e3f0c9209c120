"""torch_vnpu's tests run where npu owns PrivateUse1.

In the workspace torch_foo wins PrivateUse1 by name order, so the main pytest
process cannot run npu; there these tests run in a child process with
TORCHPLUG_PRIVATEUSE1=npu, one reported outcome per test
(see torchplug.privateuse1_testing).
"""

import pytest
import torch

from torchplug.privateuse1_testing import run_in_owner_process

pytest_collection_modifyitems = run_in_owner_process("npu", __file__)


@pytest.fixture
def npu() -> str:
    if not hasattr(torch, "npu") or not torch.npu.is_available():
        from torchplug import loader

        status = loader.statuses().get("npu")
        pytest.fail(
            f"the npu backend is not active here: {status.reason if status else 'not loaded'}"
        )
    return "npu"


@pytest.fixture(autouse=True)
def _synchronize_after_test():
    yield
    if hasattr(torch, "npu") and torch.npu.is_available():
        for index in range(torch.npu.device_count()):
            torch.npu.synchronize(index)
