"""Core tests run on the `foo` device, loaded by `import torch` alone (torch_foo is in the workspace).

The fixtures are torchplug-testing's: the device's work is drained after each
test (that of the test's own device where a test is parametrized over devices).
"""

import pytest

from torchplug import settings
from torchplug_testing.fixtures import _drain_device, require_device  # noqa: F401 - fixtures

DEVICE = "foo"


@pytest.fixture(scope="session")
def device() -> str:
    owner = settings.current().privateuse1
    if owner not in (None, DEVICE):
        # A child that reruns another backend's share (device_matrix.rerun_as_owner).
        pytest.skip(
            f"this process gives PrivateUse1 to '{owner}'; the '{DEVICE}' tests run elsewhere"
        )
    return require_device(
        DEVICE, f"the '{DEVICE}' backend did not autoload; run the tests in the uv workspace"
    )
