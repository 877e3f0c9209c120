"""DataLoader with pinned memory feeding a simulated device."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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


def test_a_loaders_pin_memory_thread_leaves_the_kernels_thread_count_alone(device: str) -> None:
    """DataLoader's pin-memory thread calls torch.set_num_threads(1) for itself,
    which also sets the count torch gives each thread at its first parallel loop.
    A stream's worker that had run only the device's own kernels took that 1
    there, inside a CPU kernel, and computed with it from then on: a small
    1x1 convolution took the single-thread algorithm, not the CPU's."""
    code = f"""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        torch.set_num_threads(2)
        generator = torch.Generator().manual_seed(0)
        x, weight, bias = (torch.randn(*size, generator=generator) for size in ((4, 16, 1, 1), (8, 16, 1, 1), (8,)))
        # With more than one thread the CPU convolves a small batch with oneDNN.
        expected = torch.nn.functional.conv2d(x, weight, bias)
        on_device = [t.to({device!r}) for t in (x, weight, bias)]
        # The first call learns the operator's result shapes on this thread;
        # the stream's worker has run the device's own kernels only.
        torch.nn.functional.conv2d(*on_device)
        (on_device[0] + on_device[0]).sum()
        torch.{device}.synchronize()
        loader = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4, num_workers=1, pin_memory=True)
        assert sum(len(batch) for (batch,) in loader) == 8
        assert torch.get_num_threads() == 2
        result = torch.nn.functional.conv2d(*on_device).cpu()  # queued on the worker
        assert torch.equal(result, expected), (result - expected).abs().max()
        """
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
