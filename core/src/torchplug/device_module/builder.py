"""Assembles ``torch.<name>`` from the parts in this package."""

from __future__ import annotations

import importlib
import types
from typing import Any

from torchplug.backend import Backend, BackendStatus
from torchplug.device_module import (
    allocators,
    amp,
    fallback,
    graphed_callables,
    graphs,
    memory,
    properties,
    random,
    streams,
)
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
        **(memory_functions := memory.functions(bound)),
        **random.functions(bound),
        **fallback.functions(bound),
        **amp.functions(),
        **allocators.functions(bound),
    }
    exported.update(graphs.functions(bound, exported))
    exported.update(graphed_callables.functions(name, exported))
    for attribute, value in exported.items():
        if callable(value) and not isinstance(value, type):
            value.__qualname__ = attribute
            value.__module__ = module.__name__
        if getattr(module, attribute, None) is not None and backend.module is not None:
            continue  # the plugin's own definition wins
        setattr(module, attribute, value)
    module.__all__ = [attribute for attribute in exported if not attribute.startswith("_")]
    if getattr(module, "memory", None) is None:
        module.memory = _memory_namespace(module, exported, memory_functions)
    _expose_initialized_flag(module, exported["is_initialized"])
    return module


_MEMORY_EXTRAS = {"MemPool", "use_mem_pool", "change_current_allocator"}


def _memory_namespace(
    module: types.ModuleType, exported: dict[str, Any], memory_functions: dict[str, Any]
) -> types.ModuleType:
    """``torch.<name>.memory``, as ``torch.cuda.memory``: the memory functions,
    pools and pluggable allocators."""
    namespace = types.ModuleType(f"{module.__name__}.memory", "Memory management of the device.")
    for attribute in exported:
        if (
            attribute in memory_functions
            or attribute in _MEMORY_EXTRAS
            or attribute.endswith("Allocator")
        ):
            setattr(namespace, attribute, getattr(module, attribute))
    return namespace


def _expose_initialized_flag(module: types.ModuleType, is_initialized: Any) -> None:
    """``module._initialized``, read live, as ``torch.cuda._initialized`` is:
    torch.utils.checkpoint saves and restores a device's RNG state only when it
    reads True."""
    if "_initialized" in module.__dict__:
        return  # the plugin keeps its own
    previous = module.__dict__.get("__getattr__")

    def __getattr__(attribute: str) -> Any:
        if attribute == "_initialized":
            return is_initialized()
        if previous is not None:
            return previous(attribute)
        raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
