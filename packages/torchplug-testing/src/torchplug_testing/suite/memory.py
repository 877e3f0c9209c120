"""Memory statistics: allocations are counted, freed, peaked and reset.

Uses ``torch.accelerator`` when the device is the current accelerator, else
the device module's CUDA-style functions.
"""

from types import SimpleNamespace

import pytest
import torch

MIB = 1 << 20


@pytest.fixture
def memory(device: str, device_module) -> SimpleNamespace:
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is not None and accelerator.type == device:
        api = torch.accelerator
    else:
        api = device_module
    missing = [
        name
        for name in ("memory_allocated", "max_memory_allocated", "reset_peak_memory_stats")
        if not hasattr(api, name)
    ]
    if missing:
        pytest.fail(f"{api.__name__} lacks {', '.join(missing)}")
    return SimpleNamespace(api=api, device=torch.device(device, device_module.current_device()))


def test_allocation_is_counted_and_freed(memory: SimpleNamespace) -> None:
    before = memory.api.memory_allocated(memory.device)
    block = torch.empty(4 * MIB, dtype=torch.uint8, device=memory.device)
    assert memory.api.memory_allocated(memory.device) >= before + 4 * MIB
    del block
    assert memory.api.memory_allocated(memory.device) == before


def test_peak_and_reset(memory: SimpleNamespace) -> None:
    memory.api.reset_peak_memory_stats(memory.device)
    baseline = memory.api.memory_allocated(memory.device)
    block = torch.empty(8 * MIB, dtype=torch.uint8, device=memory.device)
    del block
    assert memory.api.max_memory_allocated(memory.device) >= baseline + 8 * MIB
    memory.api.reset_peak_memory_stats(memory.device)
    assert memory.api.max_memory_allocated(memory.device) == memory.api.memory_allocated(
        memory.device
    )


def test_memory_stats_and_reserved(memory: SimpleNamespace) -> None:
    block = torch.empty(2 * MIB, dtype=torch.uint8, device=memory.device)
    stats = memory.api.memory_stats(memory.device)
    assert stats["allocated_bytes.all.current"] >= 2 * MIB
    assert memory.api.memory_reserved(memory.device) >= stats["allocated_bytes.all.current"]
    del block
    memory.api.empty_cache()
    assert memory.api.memory_reserved(memory.device) >= memory.api.memory_allocated(memory.device)


def test_memory_info(device: str, device_module) -> None:
    if hasattr(torch.accelerator, "get_memory_info") and (
        getattr(torch.accelerator.current_accelerator(), "type", None) == device
    ):
        free, total = torch.accelerator.get_memory_info(device_module.current_device())
    else:
        free, total = device_module.mem_get_info()
    assert 0 < free <= total
    assert total == device_module.get_device_properties().total_memory


def test_per_device_accounting(device: str, second_device: torch.device, device_module) -> None:
    first = torch.device(device, 0)
    before = device_module.memory_allocated(first)
    block = torch.empty(4 * MIB, dtype=torch.uint8, device=second_device)
    assert device_module.memory_allocated(first) == before
    assert device_module.memory_allocated(second_device) >= 4 * MIB
    del block
