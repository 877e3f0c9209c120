"""ModuleInfo sweep, forward: every module's outputs and buffers on the device equal the CPU's."""

import pytest

from torchplug_testing.guard import OpinfoRunner
from torchplug_testing.suite import _sweep


@pytest.mark.parametrize(("module_info", "dtype"), _sweep.module_parameters("forward"))
def test_forward(
    module_info, dtype, device: str, opinfo_runner: OpinfoRunner, request: pytest.FixtureRequest
) -> None:
    _sweep.run_module("forward", module_info, dtype, device, opinfo_runner, request)
