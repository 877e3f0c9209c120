"""Tensor creation and dtypes: factories, conversions and metadata match the CPU."""

import pytest
import torch

from torchplug_testing import device_api
from torchplug_testing.compare import assert_matches_cpu, check_against_cpu

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_factories(device: str, dtype: torch.dtype) -> None:
    for factory in (torch.zeros, torch.ones):
        made = factory(3, 4, dtype=dtype, device=device)
        assert made.device == torch.device(device, device_api.current_device(device, "creation"))
        assert_matches_cpu(made, factory(3, 4, dtype=dtype))
    full = torch.full((2, 3), 1, dtype=dtype, device=device)
    assert_matches_cpu(full, torch.full((2, 3), 1, dtype=dtype))
    empty = torch.empty(5, 2, dtype=dtype, device=device)
    assert (empty.shape, empty.dtype, empty.device.type) == ((5, 2), dtype, device)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_keeps_values(device: str, dtype: torch.dtype) -> None:
    host = torch.arange(-6, 6).reshape(3, 4).to(dtype)
    on_device = host.to(device)
    assert on_device.dtype == dtype
    assert torch.equal(on_device.cpu(), host)


def test_ranges_and_literals(device: str) -> None:
    assert_matches_cpu(torch.arange(0, 10, 3, device=device), torch.arange(0, 10, 3))
    assert_matches_cpu(torch.linspace(-1, 1, 7, device=device), torch.linspace(-1, 1, 7))
    assert_matches_cpu(torch.eye(3, 5, device=device), torch.eye(3, 5))
    literal = [[1.5, -2.0], [3.25, 0.0]]
    assert_matches_cpu(torch.tensor(literal, device=device), torch.tensor(literal))
    assert torch.tensor(7, device=device).item() == 7


@pytest.mark.parametrize("target", [torch.float16, torch.bfloat16, torch.int32, torch.bool])
def test_dtype_conversion_on_device(device: str, target: torch.dtype) -> None:
    values = torch.tensor([-2.7, -0.5, 0.0, 0.49, 1.5, 1e4])
    check_against_cpu(lambda x: x.to(target), (values,), device)


def test_like_factories_follow_input(device: str) -> None:
    source = torch.randn(2, 3, dtype=torch.float64).to(device)
    for like in (torch.zeros_like, torch.ones_like, torch.empty_like, torch.randn_like):
        made = like(source)
        assert (made.device, made.dtype, made.shape) == (source.device, source.dtype, source.shape)
    assert source.new_full((4,), 2.0).device == source.device


def test_type_promotion_matches_cpu(device: str) -> None:
    operands = (
        torch.tensor([1, 2, 3], dtype=torch.int32),
        torch.tensor([0.5, 1.5, 2.5], dtype=torch.float16),
    )
    result = check_against_cpu(lambda a, b: a * b + 1, operands, device)
    assert result.dtype == torch.float16
