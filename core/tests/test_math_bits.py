"""Tensors with the conjugate or negative bit copy to, from and within devices as on the CPU.

The bits are lazy: `x.conj()` and `torch._neg_view(x)` only flag the tensor,
and every copy must apply the flag. Copying a conjugate device tensor once
recursed without end and killed the interpreter.
"""

import pytest
import torch

from device_matrix import active_devices, rerun_as_owner

DEVICES = active_devices()
COMPLEX = [torch.complex64, torch.complex128]
NEGATABLE = [torch.float32, torch.float64, torch.int64, torch.bfloat16, torch.float16, *COMPLEX]


def sample(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    if dtype.is_complex:
        return torch.randn(*shape, dtype=dtype, generator=generator)
    return torch.randn(*shape, generator=generator).mul(10).to(dtype)


def assert_same(device_result: torch.Tensor, cpu_result: torch.Tensor) -> None:
    assert device_result.is_conj() == cpu_result.is_conj()
    assert device_result.is_neg() == cpu_result.is_neg()
    torch.testing.assert_close(device_result.cpu(), cpu_result, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("device", DEVICES)
def test_conjugate_views_copy_to_the_host(device: str, dtype: torch.dtype) -> None:
    x = sample(dtype, 4, 5)
    d = x.to(device)
    views = {
        "conj": lambda t: t.conj(),
        "H": lambda t: t.H,
        "mH": lambda t: t.mH,
        "sliced conj": lambda t: t.conj()[1:, ::2],
        "conj transposed": lambda t: t.conj().t(),
    }
    for name, view in views.items():
        result = view(d)
        assert result.is_conj(), name
        torch.testing.assert_close(result.cpu(), view(x), rtol=0, atol=0, msg=name)
        torch.testing.assert_close(
            result.resolve_conj().cpu(), view(x).resolve_conj(), rtol=0, atol=0
        )


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("device", DEVICES)
def test_conjugate_copies_to_and_within_the_device(device: str, dtype: torch.dtype) -> None:
    x = sample(dtype, 3, 4)
    d = x.to(device)
    assert_same(x.conj().to(device), x.conj().to("cpu", copy=True))
    assert_same(d.conj().clone(), x.conj().clone())
    assert_same(d.conj_physical(), x.conj_physical())
    assert_same(d.conj().resolve_conj(), x.conj().resolve_conj())
    assert_same(d.conj().contiguous(), x.conj().contiguous())
    # Copying into a conjugate destination writes conj(src) into its memory.
    destination = torch.zeros_like(d).conj()
    destination.copy_(d)
    expected = torch.zeros_like(x).conj()
    expected.copy_(x)
    assert_same(destination, expected)
    physical = torch.zeros_like(d)
    physical.copy_(d.conj())
    torch.testing.assert_close(physical.cpu(), x.conj().resolve_conj(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", NEGATABLE)
@pytest.mark.parametrize("device", DEVICES)
def test_negative_views_copy_like_the_cpu(device: str, dtype: torch.dtype) -> None:
    x = sample(dtype, 3, 4)
    d = x.to(device)
    negated = torch._neg_view(d)
    assert negated.is_neg()
    assert_same(negated, torch._neg_view(x))
    assert_same(negated.resolve_neg(), torch._neg_view(x).resolve_neg())
    assert_same(torch._neg_view(x).to(device), torch._neg_view(x).to("cpu", copy=True))
    assert_same(negated[1:].clone(), torch._neg_view(x)[1:].clone())
    if dtype.is_complex:
        # conj of a conj view of a complex tensor carries both lazily, e.g. imag of conj.
        assert_same(d.conj().imag, x.conj().imag)


@pytest.mark.parametrize("device", DEVICES)
def test_copies_between_two_devices_apply_the_bits(device: str) -> None:
    x = sample(torch.complex64, 6)
    for other in DEVICES:
        torch.testing.assert_close(x.to(device).conj().to(other).cpu(), x.conj(), rtol=0, atol=0)
    if getattr(torch, device).device_count() > 1:
        moved = x.to(f"{device}:0").conj().to(f"{device}:1")
        torch.testing.assert_close(moved.cpu(), x.conj(), rtol=0, atol=0)


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda t: torch.linalg.svd(t)[0].abs(), id="svd"),
        pytest.param(torch.linalg.pinv, id="pinv"),
        pytest.param(torch.cov, id="cov"),
        pytest.param(torch.corrcoef, id="corrcoef"),
        pytest.param(lambda t: t.H @ t, id="H-matmul"),
        pytest.param(lambda t: torch.fft.ifft(t), id="ifft"),
        pytest.param(lambda t: torch.fft.hfft(t), id="hfft"),
        pytest.param(lambda t: torch.var(t, dim=0), id="var"),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_operators_that_make_conjugate_views_inside(device: str, op) -> None:
    x = sample(torch.complex64, 5, 5)
    torch.testing.assert_close(op(x.to(device)).cpu(), op(x), rtol=1e-4, atol=1e-4)


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
