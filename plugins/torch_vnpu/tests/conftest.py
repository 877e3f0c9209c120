"""torch_vnpu's tests run where npu owns PrivateUse1.

In the workspace torch_foo wins PrivateUse1 by name order, so the main pytest
process cannot run npu; there these tests run in a child process with
TORCHPLUG_PRIVATEUSE1=npu, one reported outcome per test
(see torchplug_testing.owner_process). The fixtures are torchplug-testing's.
"""

import pytest

import torchplug
from torchplug_testing.fixtures import _drain_device, require_device  # noqa: F401 - fixtures
from torchplug_testing.owner_process import run_in_owner_process

pytest_collection_modifyitems = run_in_owner_process("npu", __file__)


@pytest.fixture(scope="session")
def npu() -> str:
    status = torchplug.statuses().get("npu")
    return require_device(
        "npu",
        f"the npu backend is not active here: {status.reason if status else 'not loaded'}",
    )


@pytest.fixture(scope="session")
def device(npu: str) -> str:
    """What the fixtures of torchplug-testing act on, unless a test is parametrized over devices."""
    return npu
