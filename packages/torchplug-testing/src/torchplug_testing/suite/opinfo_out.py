"""OpInfo sweep, ``out=``: every operator with an ``out=`` overload refuses an
``out=`` tensor on the CPU, as CUDA does, and leaves it unwritten."""

import pytest

from torchplug_testing import out_device
from torchplug_testing.guard import OpinfoRunner
from torchplug_testing.suite import _sweep


@pytest.mark.parametrize(
    ("op", "dtype"),
    [
        pytest.param(op, dtype, id=f"{_sweep.opinfo.op_id(op)}-{_sweep.dtype_name(dtype)}")
        for op, dtype in out_device.operators()
    ],
)
def test_host_out_is_refused(
    op, dtype, device: str, opinfo_runner: OpinfoRunner, request: pytest.FixtureRequest
) -> None:
    _sweep.run(out_device.MODE, op, dtype, device, opinfo_runner, request)
