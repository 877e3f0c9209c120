"""What every framework integration asks: the active torchplug devices, the one a
framework should train on, and how to wrap one of the framework's functions."""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Callable
from typing import Any

from torchplug.activation import records
from torchplug.backend import BackendState

log = logging.getLogger("torchplug.integrations")


def active() -> list[str]:
    """The devices of the torchplug backends active in this process."""
    return [
        name for name, status in records.statuses().items() if status.state is BackendState.ACTIVE
    ]


def accelerator() -> str | None:
    """``torch.accelerator``'s device when it is a torchplug device, else None (no
    accelerator, or one such as CUDA that the frameworks find by themselves)."""
    import torch

    if not torch.accelerator.is_available():
        return None
    device = torch.accelerator.current_accelerator()
    return device.type if device is not None and device.type in active() else None


def training_device(variable: str) -> str | None:
    """The torchplug device a framework trains on: the one the environment variable
    ``variable`` names (e.g. ``ACCELERATE_TORCH_DEVICE=hpu``), else the accelerator's."""
    named = os.environ.get(variable)
    if named:
        import torch

        device = torch.device(named).type
        return device if device in active() else None
    return accelerator()


def wrap(owner: type | types.ModuleType, name: str, make: Callable[[Any], Any]) -> None:
    """Replaces the attribute ``name`` of a class or module by ``make(original)``, once.

    ``original`` is what the owner itself holds (for a class, the descriptor:
    the property, ``cached_property`` or ``staticmethod``). Raises
    AttributeError when the framework release has no such attribute, which
    :func:`torchplug.integrations.install` reports with what to set instead.
    """
    marker = f"__torchplug_wrapped_{name}__"
    if marker in vars(owner):
        return
    if name not in vars(owner):
        raise AttributeError(f"{owner.__name__} has no attribute {name!r} to adapt")
    original = vars(owner)[name]
    replacement = make(original)
    if hasattr(replacement, "__set_name__"):  # a cached_property learns its name here
        replacement.__set_name__(owner, name)
    setattr(owner, name, replacement)
    setattr(owner, marker, original)
    log.debug("torchplug adapted %s.%s", owner.__name__, name)
