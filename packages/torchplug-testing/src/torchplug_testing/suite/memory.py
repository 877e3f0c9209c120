"""Memory statistics: allocations are counted, freed, peaked and reset.

Uses ``torch.accelerator`` when the device is the current accelerator, else
the device module's CUDA-style functions. A function neither offers fails the
test that needs it, naming it.
"""

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import torch

from torchplug_testing import device_api

MIB = 1 << 20


class MemoryAPI:
    """The memory statistics of ``device``: ``torch.accelerator``'s functions when the
    device is the current accelerator, else ``torch.<device>``'s."""

    # torch.accelerator's names whose device-module counterpart is named differently.
    MODULE_NAMES: ClassVar[dict[str, str]] = {"get_memory_info": "mem_get_info"}

    def __init__(self, device: str, device_module: device_api.DeviceModule) -> None:
        self._device = device
        self._module = device_module

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        module_name = self.MODULE_NAMES.get(name, name)
        is_accelerator = device_api.is_accelerator(self._device)
        function = getattr(torch.accelerator, name, None) if is_accelerator else None
        if function is None:
            return getattr(self._module, module_name)
        failing = f"torch.accelerator.{name} fails on '{self._device}'"
        if not self._module.provides(module_name):
            failing = f"torch.{self._device}.{module_name} is missing and {failing}"

        def through_accelerator(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except RuntimeError as error:
                cause = " ".join(str(error).split()) or type(error).__name__
            pytest.fail(f"{failing}: the memory group needs it ({cause})", pytrace=False)

        return through_accelerator


class Memory:
    """The memory API of the device under test, and its current device."""

    def __init__(self, device: str, device_module: device_api.DeviceModule) -> None:
        self.api = MemoryAPI(device, device_module)
        self._device = device

    @property
    def device(self) -> torch.device:
        return torch.device(self._device, device_api.current_device(self._device, "memory"))


@pytest.fixture
def memory(device: str, device_module: device_api.DeviceModule) -> Memory:
    return Memory(device, device_module)


def test_allocation_is_counted_and_freed(memory: Memory) -> None:
    before = memory.api.memory_allocated(memory.device)
    block = torch.empty(4 * MIB, dtype=torch.uint8, device=memory.device)
    assert memory.api.memory_allocated(memory.device) >= before + 4 * MIB
    del block
    assert memory.api.memory_allocated(memory.device) == before


def test_peak_and_reset(memory: Memory) -> None:
    memory.api.reset_peak_memory_stats(memory.device)
    baseline = memory.api.memory_allocated(memory.device)
    block = torch.empty(8 * MIB, dtype=torch.uint8, device=memory.device)
    del block
    assert memory.api.max_memory_allocated(memory.device) >= baseline + 8 * MIB
    memory.api.reset_peak_memory_stats(memory.device)
    assert memory.api.max_memory_allocated(memory.device) == memory.api.memory_allocated(
        memory.device
    )


def test_memory_stats_and_reserved(memory: Memory) -> None:
    block = torch.empty(2 * MIB, dtype=torch.uint8, device=memory.device)
    stats = memory.api.memory_stats(memory.device)
    assert stats["allocated_bytes.all.current"] >= 2 * MIB
    assert memory.api.memory_reserved(memory.device) >= stats["allocated_bytes.all.current"]
    del block
    memory.api.empty_cache()
    assert memory.api.memory_reserved(memory.device) >= memory.api.memory_allocated(memory.device)


def test_memory_info(device: str, device_module, memory: Memory) -> None:
    if hasattr(torch.accelerator, "get_memory_info") and device_api.is_accelerator(device):
        free, total = memory.api.get_memory_info(memory.device.index)
    else:
        free, total = device_module.mem_get_info()
    assert 0 < free <= total
    assert total == device_module.get_device_properties().total_memory


def test_per_device_accounting(device: str, second_device: torch.device, memory: Memory) -> None:
    first = torch.device(device, 0)
    before = memory.api.memory_allocated(first)
    block = torch.empty(4 * MIB, dtype=torch.uint8, device=second_device)
    assert memory.api.memory_allocated(first) == before
    assert memory.api.memory_allocated(second_device) >= 4 * MIB
    del block
