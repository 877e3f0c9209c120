"""What Inductor's generated wrappers call on a torchplug device."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from torchplug import _C


def launch(
    name: str, kernel: Callable[..., None], device_type: str, index: int, *args: Any
) -> None:
    """Run one generated kernel as a device kernel launch, like an eager kernel."""
    memory = _touched_memory(args) if _C.strict_mode() else []
    with _C.CompiledKernelLaunch(name, _device_type_id(device_type), index, memory):
        kernel(*args)


def raw_stream_getter(device_type: str) -> Callable[[int], int]:
    module = getattr(torch, device_type)

    def get_raw_stream(index: int) -> int:
        return module.current_stream(index).stream_id

    return get_raw_stream


@functools.cache
def _device_type_id(device_type: str) -> int:
    return _C.device_type_id(device_type)


def _touched_memory(args: tuple[Any, ...]) -> list[int]:
    return [
        argument.untyped_storage().data_ptr()
        for argument in args
        if isinstance(argument, torch.Tensor) and argument.device.type != "cpu"
    ]
