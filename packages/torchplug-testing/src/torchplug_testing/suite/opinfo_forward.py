"""OpInfo sweep, forward: every operator's outputs on the device equal the CPU's."""

import pytest

from torchplug_testing.guard import OpinfoRunner
from torchplug_testing.suite import _sweep


@pytest.mark.parametrize(("op", "dtype"), _sweep.parameters("forward"))
def test_forward(
    op, dtype, device: str, opinfo_runner: OpinfoRunner, request: pytest.FixtureRequest
) -> None:
    _sweep.run("forward", op, dtype, device, opinfo_runner, request)
