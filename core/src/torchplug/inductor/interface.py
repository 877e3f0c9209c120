"""Dynamo's view of a torchplug device: its runtime, through ``torch.<device>``."""

from __future__ import annotations

import functools
import hashlib
import types
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import torch


def install(device_interface: types.ModuleType, devices: Callable[[], tuple[str, ...]]) -> None:
    """Register an interface for every enabled device, now and whenever Dynamo re-scans."""
    builtin_registration = device_interface.init_device_reg

    def init_device_reg() -> None:
        builtin_registration()
        for name in devices():
            device_interface.device_interfaces.setdefault(name, interface_for(name))

    device_interface.init_device_reg = init_device_reg
    for name in devices():
        device_interface.device_interfaces.setdefault(name, interface_for(name))


def interface_for(name: str) -> type:
    from torch._dynamo.device_interface import DeviceInterface

    module = getattr(torch, name)

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            module.set_device(device)

        @staticmethod
        def current_device() -> int:
            return module.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            return module.get_device_properties(_index(device))

    class TorchplugInterface(DeviceInterface):
        device = module.device
        Event = module.Event
        Stream = module.Stream

        @staticmethod
        def current_device() -> int:
            return module.current_device()

        @staticmethod
        def set_device(device: torch.types.Device) -> None:
            module.set_device(device)

        @staticmethod
        def maybe_exchange_device(device: int) -> int:
            previous = module.current_device()
            if device != previous:
                module.set_device(device)
            return previous

        @staticmethod
        def exchange_device(device: int) -> int:
            previous = module.current_device()
            module.set_device(device)
            return previous

        @staticmethod
        def device_count() -> int:
            return module.device_count()

        @staticmethod
        def is_available() -> bool:
            return module.is_available()

        @staticmethod
        def stream(stream: torch.Stream) -> Any:
            return module.stream(stream)

        @staticmethod
        def current_stream() -> torch.Stream:
            return module.current_stream()

        @staticmethod
        def set_stream(stream: torch.Stream) -> None:
            module.set_stream(stream)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            module.set_stream(
                torch.Stream(
                    stream_id=stream_id, device_index=device_index, device_type=device_type
                )
            )

        @staticmethod
        def get_raw_stream(device_index: int) -> int:
            return module.current_stream(device_index).stream_id

        @staticmethod
        def synchronize(device: torch.types.Device = None) -> None:
            module.synchronize(device)

        @staticmethod
        def get_compute_capability(device: torch.types.Device = None) -> Any:
            major, minor = module.get_device_capability(_index(device))
            return major * 10 + minor

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return module.is_bf16_supported()

        @staticmethod
        def memory_allocated(device: torch.types.Device = None) -> int:
            return module.memory_allocated(device)

        @classmethod
        def get_cache_system_info(cls) -> dict[str, object]:
            return {"device": name, "codegen": codegen_revision()}

    TorchplugInterface.Worker = Worker
    TorchplugInterface.__name__ = TorchplugInterface.__qualname__ = f"{name.capitalize()}Interface"
    return TorchplugInterface


@functools.cache
def codegen_revision() -> str:
    """Changes whenever the code torchplug generates for compiled graphs may
    change, so that Inductor's caches never serve code from another revision."""
    digest = hashlib.sha256(metadata.version("torchplug").encode())
    package = Path(__file__).parent
    for source in ("codegen.py", "runtime.py"):
        digest.update((package / source).read_bytes())
    return digest.hexdigest()[:16]


def _index(device: torch.types.Device) -> int | None:
    if device is None:
        return None
    if isinstance(device, int):
        return device
    return torch.device(device).index
