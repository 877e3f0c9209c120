"""Core tests run on the `foo` device, loaded by `import torch` alone (torch_foo is in the workspace)."""

import pytest
import torch


@pytest.fixture
def device() -> str:
    if not hasattr(torch, "foo") or not torch.foo.is_available():
        pytest.fail("the 'foo' backend did not autoload; run the tests in the uv workspace")
    return "foo"


@pytest.fixture(autouse=True)
def _synchronize_after_test():
    yield
    if hasattr(torch, "foo") and torch.foo.is_available():
        for index in range(torch.foo.device_count()):
            torch.foo.synchronize(index)
