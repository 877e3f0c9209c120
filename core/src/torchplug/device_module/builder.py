"""Assembles ``torch.<name>`` from the parts in this package."""

from __future__ import annotations

import importlib
import types
from typing import Any

from torchplug.backend import Backend, BackendStatus
from torchplug.device_module import amp, memory, properties, random, streams
from torchplug.device_module._device import BoundDevice


def build(backend: Backend, status: BackendStatus) -> types.ModuleType:
    """A fresh device module for ``backend``, bound to its activation ``status``."""
    name = backend.name
    if backend.module is not None:
        module = importlib.import_module(backend.module)
    else:
        module = types.ModuleType(
            f"torch.{name}", f"The '{name}' device (a torchplug simulated accelerator)."
        )
    bound = BoundDevice(backend, status)
    exported: dict[str, Any] = {
        **properties.functions(bound),
        **streams.functions(bound),
        **memory.functions(bound),
        **random.functions(bound),
        **amp.functions(),
    }
    for attribute, value in exported.items():
        if callable(value) and not isinstance(value, type):
            value.__qualname__ = attribute
            value.__module__ = module.__name__
        if getattr(module, attribute, None) is not None and backend.module is not None:
            continue  # the plugin's own definition wins
        setattr(module, attribute, value)
    module.__all__ = [attribute for attribute in exported if not attribute.startswith("_")]
    return module
