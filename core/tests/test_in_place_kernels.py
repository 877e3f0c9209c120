"""In-place arithmetic and zeroing on the devices equal the CPU's, on every
path: the direct device loops (same shape, or a number) and the fallback
(broadcasting, mixed dtypes, strided views), errors included."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from device_matrix import active_devices, rerun_as_owner

DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.complex64, torch.bool)


def _tensor(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(-5, 5, shape, generator=generator, dtype=dtype)
    return torch.randn(shape, generator=generator, dtype=dtype)


def _same_on(device: str, run: Callable[[str], torch.Tensor]) -> None:
    """`run(device)` and `run("cpu")` give the same tensor, or the same error."""
    try:
        expected = run("cpu")
    except RuntimeError as error:
        cpu_message = str(error).split("(")[0]
    else:
        got = run(device)
        assert got.device.type == device
        torch.testing.assert_close(got.cpu(), expected, equal_nan=True)
        return
    with pytest.raises(RuntimeError) as raised:
        run(device)
    assert str(raised.value).split("(")[0] == cpu_message


OTHERS = {
    "same shape": lambda dtype: _tensor((4, 6), dtype, 2),
    "0-dim tensor": lambda dtype: _tensor((), dtype, 3),
    "row (broadcast)": lambda dtype: _tensor((6,), dtype, 4),
    "python number": lambda dtype: 3,
    "other dtype": lambda dtype: _tensor((4, 6), torch.float64, 5),
}


@pytest.mark.parametrize("device", active_devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("other", OTHERS, ids=str)
@pytest.mark.parametrize("op", ["add_", "mul_"])
def test_binary_in_place(device: str, dtype: torch.dtype, other: str, op: str) -> None:
    def run(on: str) -> torch.Tensor:
        self = _tensor((4, 6), dtype, 1).to(on)
        operand = OTHERS[other](dtype)
        operand = operand.to(on) if isinstance(operand, torch.Tensor) else operand
        result = getattr(self, op)(operand)
        assert result is self
        return self

    _same_on(device, run)


@pytest.mark.parametrize("device", active_devices())
def test_in_place_on_views(device: str) -> None:
    def strided(on: str) -> torch.Tensor:
        base = torch.arange(24.0).reshape(4, 6).to(on)
        view = base[:, ::2]
        view.add_(torch.ones(4, 3, device=on), alpha=2).mul_(3)
        return base

    def conjugate(on: str) -> torch.Tensor:
        base = torch.tensor([1 + 2j, 3 - 1j], device=on)
        base.conj().add_(torch.tensor([1j, 1j], device=on))
        base.add_(base.conj())
        return base

    def overlapping(on: str) -> torch.Tensor:
        return torch.zeros(1, device=on).expand(3).add_(torch.ones(3, device=on))

    def wrong_shape(on: str) -> torch.Tensor:
        return torch.zeros(3, device=on).add_(torch.ones(2, 3, device=on))

    for run in (strided, conjugate, overlapping, wrong_shape):
        _same_on(device, run)


@pytest.mark.parametrize("device", active_devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero(device: str, dtype: torch.dtype) -> None:
    def run(on: str) -> torch.Tensor:
        base = _tensor((4, 6), dtype, 1).to(on)
        base[1].zero_()
        base[:, 3].zero_()
        base.t()[4:].zero_()
        empty = torch.empty(0, 3, device=on, dtype=dtype).zero_()
        assert empty.shape == (0, 3)
        return base

    _same_on(device, run)
    dense = _tensor((5, 3), dtype, 7).to(device).t().zero_()
    assert not dense.cpu().any()


@pytest.mark.parametrize("device", active_devices())
def test_mixed_devices_raise(device: str) -> None:
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device=device).add_(torch.ones(3))


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
