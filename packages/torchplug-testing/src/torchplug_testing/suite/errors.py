"""Bad input fails with clear errors: invalid indices, cross-device operands, out of memory."""

import pytest
import torch

from torchplug_testing import device_api


def test_invalid_device_index(device: str, device_module) -> None:
    count = device_api.device_count(device)
    if count is None:
        count = device_module.device_count()  # neither knows: fails, naming the function
    with pytest.raises((RuntimeError, ValueError, AssertionError)) as caught:
        torch.ones(2, device=torch.device(device, count))
    message = str(caught.value).lower()
    assert str(count) in message or "invalid" in message or "ordinal" in message, message


def test_cpu_and_device_operands(device: str) -> None:
    with pytest.raises(RuntimeError, match="same device") as caught:
        torch.ones(3, device=device) + torch.ones(3)
    assert device in str(caught.value)
    assert "cpu" in str(caught.value)
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(torch.ones(2, 2, device=device), torch.ones(2, 2))


def test_two_device_indices(device: str, second_device: torch.device) -> None:
    with pytest.raises(RuntimeError, match="same device") as caught:
        torch.ones(3, device=torch.device(device, 0)) * torch.ones(3, device=second_device)
    assert f"{device}:1" in str(caught.value)


def test_out_of_memory_is_reported_and_recoverable(device: str, device_module) -> None:
    total = device_module.get_device_properties().total_memory
    before = device_module.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError) as caught:
        torch.empty(total + 1, dtype=torch.uint8, device=device)
    assert "memory" in str(caught.value).lower()
    assert device_module.memory_allocated() == before
    # The device stays usable.
    assert torch.ones(4, device=device).sum().item() == 4


def test_index_out_of_range(device: str) -> None:
    data = torch.arange(5.0, device=device)
    with pytest.raises((IndexError, RuntimeError)) as caught:
        data[torch.tensor([7], device=device)].cpu()
    assert "index" in str(caught.value).lower()
    with pytest.raises(IndexError, match=r"out of range|out of bounds"):
        data[9]
