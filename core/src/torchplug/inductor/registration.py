"""A torchplug device as Dynamo and Inductor see it, registered through their
extension points, shaped like upstream's reference backend (OpenReg's
``inductor_backend.py``): a device interface, ``register_backend_for_device``
with C++ scheduling and a wrapper of our own, and device op overrides.

The kernels are Inductor's C++ (CPP) kernels; what makes them device kernels
is the wrapper (:mod:`torchplug.inductor.wrapper`).

Nothing here replaces a torch function; what had to be replaced is in
:mod:`torchplug.inductor.replacements`, which also checks the signatures of
what this module calls and overrides.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from torchplug.device_kind import kind_of_device
from torchplug.inductor import wrapper

_PACKAGE = Path(__file__).parent


def register_interface(name: str) -> None:
    """Give Dynamo the device's runtime (streams, events, current device, properties)."""
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(name, interface_for(name))


def register_codegen(name: str, devices: Callable[[], tuple[str, ...]]) -> None:
    """Give Inductor the device's scheduling, wrapper and op overrides.

    ``devices`` answers which devices torchplug has enabled, so that one
    wrapper class serves them all."""
    from torch._inductor.codegen.common import (
        register_backend_for_device,
        register_device_op_overrides,
    )

    register_backend_for_device(
        name,
        wrapper.scheduling(),
        wrapper.wrapper_codegen(devices),
        wrapper.UnsupportedCppWrapper,
        device_custom_pass=_cache_key_pass(),
    )
    register_device_op_overrides(name, _device_op_overrides(name))


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

    TorchplugInterface.Worker = Worker
    TorchplugInterface.__name__ = TorchplugInterface.__qualname__ = f"{name.capitalize()}Interface"
    return TorchplugInterface


def integration_sources(package: Path = _PACKAGE) -> list[Path]:
    """Every file of the integration package: what the generated code depends on."""
    return sorted(
        path
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.relative_to(package).parts
    )


def revision_of(package: Path = _PACKAGE) -> str:
    """Changes whenever any file of ``package`` or the torchplug release does."""
    digest = hashlib.sha256(metadata.version("torchplug").encode())
    for source in integration_sources(package):
        digest.update(source.relative_to(package).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def integration_revision() -> str:
    return revision_of()


def _kernel_thread_count() -> str:
    """The thread count the generated C++ kernels are specialised for.

    Inductor writes a kernel with an OpenMP parallel region unless it is
    compiled under one thread, and keys its FX graph cache on the thread count
    only for graphs with CPU tensors: without this, a device graph compiled in
    a two-thread process is served, parallel region and all, to a process
    running one thread (and the other way round)."""
    from torch._inductor import config

    if config.cpp.dynamic_threads:
        return "dynamic-threads"
    threads = config.cpp.threads if config.cpp.threads >= 1 else torch.get_num_threads()
    return f"{threads}-threads"


@functools.cache
def _cache_key_pass() -> Any:
    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    class IntegrationRevision(CustomGraphModulePass):
        """Changes nothing in the graph. Inductor hashes the ``uuid`` of every
        device's custom pass into its FX graph (and AOTAutograd) cache keys, in
        torch 2.14 and 2.15 alike: this pass makes them change whenever any file
        of torchplug's Inductor integration does, so that a cache never serves
        code generated by another revision of it, or for another thread count."""

        def __call__(self, gm: torch.fx.GraphModule) -> None:
            return None

        def uuid(self) -> str:
            return f"{integration_revision()}-{_kernel_thread_count()}"

    return IntegrationRevision()


def _device_op_overrides(name: str) -> Any:
    from torch._inductor.codegen.common import DeviceOpOverrides

    aten_type = kind_of_device(name).aten_device_type

    class TorchplugDeviceOpOverrides(DeviceOpOverrides):
        def import_get_raw_stream_as(self, alias: str) -> str:
            return (
                "from torchplug.inductor.runtime import raw_stream_getter; "
                f"{alias} = raw_stream_getter({name!r})"
            )

        def set_device(self, device_idx: Any) -> str:
            return f"torch.{name}.set_device({device_idx})"

        def synchronize(self) -> str:
            return f"torch.{name}.synchronize()"

        def device_guard(self, device_idx: Any) -> str:
            return f"torch.{name}.device({device_idx})"

        def aten_device_type(self) -> str:
            return aten_type

    return TorchplugDeviceOpOverrides()


def _index(device: torch.types.Device) -> int | None:
    if device is None:
        return None
    if isinstance(device, int):
        return device
    return torch.device(device).index
