"""Pluggable allocators: ``torch.<name>.memory.PluggableAllocator`` and
``change_current_allocator``, as ``torch.cuda.memory``'s
``CUDAPluggableAllocator`` and ``change_current_allocator``; a ``MemPool``
takes one too.

The allocator is a shared library exporting two C functions::

    void* alloc(size_t size, int device, void* stream);
    void free(void* ptr, size_t size, int device, void* stream);

``stream`` is the driver's stream (``TPD_Stream*``) the memory is allocated
for or freed after. ``free`` runs once the work queued on the block's streams
before the tensor was freed has run. Without an init function the memory is
host memory the library allocated, which only devices whose memory the host
addresses take; with one (``void init(const TPD_Api* api, TPD_Client*
client)``, called once per device type before the first allocation) the
library allocates the device's own memory through the driver, on any device.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from torchplug.device_module._device import BoundDevice


class PluggableAllocator:
    """The allocate and free functions ``alloc_fn_name`` and ``free_fn_name``
    of the shared library ``path_to_so_file``, and its optional init function
    ``init_fn_name``, which receives the driver's API and client."""

    def __init__(
        self,
        path_to_so_file: str | os.PathLike[str],
        alloc_fn_name: str,
        free_fn_name: str,
        init_fn_name: str | None = None,
    ) -> None:
        path = os.fspath(path_to_so_file)
        try:
            # ctypes never unloads a library: blocks may outlive this object.
            self._library = ctypes.CDLL(path)
        except OSError as error:
            raise OSError(
                f"PluggableAllocator cannot load the allocator library {path!r} ({error}); "
                "give the path of a shared library built with -shared -fPIC."
            ) from error
        self.name = f"{path} ({alloc_fn_name}, {free_fn_name})"
        self.addresses = (
            self._address(path, alloc_fn_name, "allocate"),
            self._address(path, free_fn_name, "free"),
        )
        self._init = None if init_fn_name is None else self._address(path, init_fn_name, "init")
        self._initialized_for: set[str] = set()

    def _address(self, path: str, symbol: str, role: str) -> int:
        try:
            function = getattr(self._library, symbol)
        except AttributeError:
            raise ValueError(
                f"The allocator library {path!r} exports no function {symbol!r} (its {role} "
                'function): check the name and declare it extern "C" so it is not mangled.'
            ) from None
        address = ctypes.cast(function, ctypes.c_void_p).value
        assert address is not None  # a found symbol has an address
        return address

    def allocator(self) -> PluggableAllocator:
        """What ``MemPool(allocator=...)`` takes, as CUDA's ``allocator()`` gives it."""
        return self

    @property
    def driver_memory(self) -> bool:
        """Whether the library allocates through the driver (it has an init function)."""
        return self._init is not None

    def serve(self, bound: BoundDevice) -> tuple[str, int, int, bool]:
        """The arguments that install the allocator on ``bound``'s device type,
        its init function called first (once per device type)."""
        if self._init is not None and bound.key not in self._initialized_for:
            bound.native().init_pluggable_allocator(bound.key, self._init)
            self._initialized_for.add(bound.key)
        return (self.name, *self.addresses, self.driver_memory)


def checked(allocator: Any, name: str) -> PluggableAllocator:
    if not isinstance(allocator, PluggableAllocator):
        raise TypeError(
            f"Expected a torch.{name}.memory.PluggableAllocator, got {type(allocator).__name__}."
        )
    return allocator


def functions(bound: BoundDevice) -> dict[str, Any]:
    name = bound.name

    def change_current_allocator(allocator: PluggableAllocator) -> None:
        """Every later allocation on the device comes from ``allocator`` and
        goes back to it when freed, uncached. Call it before the device's
        first tensor."""
        allocator = checked(allocator, name)
        bound.native().change_current_allocator(bound.key, *allocator.serve(bound))

    return {
        "PluggableAllocator": PluggableAllocator,
        f"{name.upper()}PluggableAllocator": PluggableAllocator,  # torch_npu's NPUPluggableAllocator
        "change_current_allocator": change_current_allocator,
    }
