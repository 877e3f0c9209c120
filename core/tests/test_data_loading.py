"""DataLoader with pinned memory feeding a simulated device."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset


def _dataset() -> TensorDataset:
    features = torch.arange(64 * 3, dtype=torch.float32).reshape(64, 3)
    return TensorDataset(features, features.sum(dim=1))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_pinned_batches_copy_asynchronously_to_the_device(device: str, num_workers: int) -> None:
    loader = DataLoader(
        _dataset(),
        batch_size=8,
        num_workers=num_workers,
        pin_memory=True,
        **({"pin_memory_device": device} if num_workers == 0 else {}),
    )
    total = torch.zeros((), device=device)
    batches = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pin_memory_device is deprecated upstream
        for features, target in loader:
            assert features.is_pinned()
            assert target.is_pinned()
            on_device = features.to(device, non_blocking=True)
            expected = target.to(device, non_blocking=True)
            total += (on_device.sum(dim=1) - expected).abs().sum()
            batches += 1
    torch.foo.synchronize()
    assert batches == 8
    assert total.item() == 0.0


def test_non_blocking_copy_is_ordered_on_the_stream(device: str) -> None:
    host = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    on_device = host.to(device, non_blocking=True)
    doubled = on_device * 2  # a kernel waits for the queued copy
    assert torch.equal(doubled.cpu(), host * 2)
    back = torch.empty_like(host).pin_memory()
    back.copy_(doubled, non_blocking=True)
    torch.foo.current_stream().synchronize()
    assert torch.equal(back, host * 2)
