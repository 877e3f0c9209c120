"""Device management and properties: availability, initialization, the
current device, synchronization, what a device is (``torch.cuda``'s
``__init__`` functions)."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import torch

from torchplug.device_module._device import BoundDevice


class DeviceProperties(NamedTuple):
    name: str
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int
    is_simulated: bool = True


def functions(bound: BoundDevice) -> dict[str, Any]:
    """The device-management part of ``torch.<name>``, by attribute name."""
    name = bound.name

    def is_available() -> bool:
        return bound.active and bound.device_count() > 0

    def device_count() -> int:
        return bound.device_count()

    def _is_in_bad_fork() -> bool:
        return bound.active and bound.native().in_bad_fork(name)

    def _lazy_init() -> None:
        if _is_in_bad_fork():
            raise RuntimeError(
                f"Cannot re-initialize {name} in forked subprocess. To use {name} with "
                "multiprocessing, use the 'spawn' start method "
                "(multiprocessing.set_start_method('spawn'))."
            )
        bound.native()

    def init() -> None:
        _lazy_init()

    def is_initialized() -> bool:
        return bound.active and bound.native().is_initialized(name) and not _is_in_bad_fork()

    def current_device() -> int:
        return bound.current_device()

    def set_device(device: Any) -> None:
        bound.set_device(bound.index(device))

    class device:
        """Context manager that makes ``device`` current for the block."""

        def __init__(self, device: Any) -> None:
            self.index = -1 if device is None else bound.index(device)
            self.previous = -1

        def __enter__(self) -> None:
            if self.index >= 0:
                self.previous = bound.current_device()
                bound.set_device(self.index)

        def __exit__(self, *exc: object) -> None:
            if self.previous >= 0:
                bound.set_device(self.previous)

    def device_of(obj: torch.Tensor) -> device:
        return device(obj.get_device() if obj.device.type == name else None)

    def synchronize(device: Any = None) -> None:
        bound.native().synchronize(name, bound.index(device))

    def get_device_properties(device: Any = None) -> DeviceProperties:
        index = bound.index(device)
        return DeviceProperties(
            name=get_device_name(index),
            total_memory=bound.native().capacity(name, index),
            multi_processor_count=os.cpu_count() or 1,
            major=1,
            minor=0,
        )

    def get_device_name(device: Any = None) -> str:
        return f"torchplug simulated {name} {bound.index(device)}"

    def get_device_capability(device: Any = None) -> tuple[int, int]:
        bound.index(device)
        return (1, 0)

    def can_device_access_peer(device: Any, peer_device: Any) -> bool:
        """True for any two valid devices: simulated devices copy to each other
        directly. As in torch.cuda, ``device`` may be None (the current device),
        ``peer_device`` must name one."""
        bound.index(device)
        bound.index(peer_device, optional=False)
        return True

    return {
        "is_available": is_available,
        "device_count": device_count,
        "_lazy_init": _lazy_init,
        "init": init,
        "is_initialized": is_initialized,
        "_is_in_bad_fork": _is_in_bad_fork,
        "current_device": current_device,
        "set_device": set_device,
        "device": device,
        "device_of": device_of,
        "synchronize": synchronize,
        "get_device_properties": get_device_properties,
        "get_device_name": get_device_name,
        "get_device_capability": get_device_capability,
        "can_device_access_peer": can_device_access_peer,
    }
