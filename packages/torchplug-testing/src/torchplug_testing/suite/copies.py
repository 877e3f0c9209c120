"""Copies between host, device and device indices, blocking and not, contiguous and not."""

import pytest
import torch

from torchplug_testing.compare import assert_matches_cpu


def test_host_device_host(device: str) -> None:
    host = torch.randn(64, 33)
    assert torch.equal(host.to(device).to("cpu"), host)


def test_copy_into_device_slice(device: str) -> None:
    target = torch.zeros(4, 5, device=device)
    patch = torch.arange(10.0).reshape(2, 5)
    target[1:3].copy_(patch)
    expected = torch.zeros(4, 5)
    expected[1:3] = patch
    assert_matches_cpu(target, expected)


def test_non_contiguous_copies(device: str) -> None:
    host = torch.randn(6, 8)
    transposed = host.to(device).t()
    assert not transposed.is_contiguous()
    assert torch.equal(transposed.cpu(), host.t())
    destination = torch.empty(8, 6, device=device)
    destination.copy_(host.t())
    assert torch.equal(destination.cpu(), host.t())
    strided = torch.empty(8, 12, device=device)[:, ::2]
    strided.copy_(host.t())
    assert torch.equal(strided.cpu(), host.t())


def test_converting_copy(device: str) -> None:
    host = torch.randn(100)
    half = torch.empty(100, dtype=torch.float16, device=device)
    half.copy_(host)
    assert torch.equal(half.cpu(), host.half())
    assert torch.equal(host.to(device, torch.float64).cpu(), host.double())


def test_device_to_device_same_index(device: str) -> None:
    source = torch.randn(16, device=device)
    clone = source.clone()
    assert clone.data_ptr() != source.data_ptr()
    source.add_(1)
    assert not torch.equal(clone.cpu(), source.cpu())


def test_between_device_indices(device: str, second_device: torch.device) -> None:
    host = torch.randn(32, 3)
    on_first = host.to(torch.device(device, 0))
    on_second = on_first.to(second_device)
    assert on_second.device == second_device
    assert torch.equal(on_second.cpu(), host)
    back = torch.empty_like(on_first)
    back.copy_(on_second.t().contiguous().t())
    assert torch.equal(back.cpu(), host)


def test_pinned_non_blocking_round_trip(device: str, device_module) -> None:
    if not torch.accelerator.is_available():
        pytest.skip("no accelerator: pinned host memory needs one")
    host = torch.randn(1 << 16)
    try:
        pinned = host.pin_memory()
    except RuntimeError as error:
        pytest.skip(f"pinned memory unavailable: {error}")
    on_device = pinned.to(device, non_blocking=True)
    result = torch.empty_like(pinned)
    result.copy_(on_device, non_blocking=True)
    device_module.synchronize()
    assert torch.equal(result, host)
