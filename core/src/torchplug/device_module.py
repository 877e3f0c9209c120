"""Builds ``torch.<name>``, the device module torch and users call into.

The module mirrors the shape of ``torch.cuda`` (device selection, streams,
events, memory, RNG, fork safety) for any torchplug backend. While a backend
is not active its functions raise the recorded load error, and
``is_available()`` answers False, so a broken plugin fails where it is used.
"""

from __future__ import annotations

import importlib
import os
import types
import warnings
from dataclasses import dataclass
from typing import Any

from torchplug.backend import Backend, BackendState, BackendStatus


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int
    is_simulated: bool = True


def build(backend: Backend, status: BackendStatus) -> types.ModuleType:
    """A fresh device module for ``backend``, bound to its activation ``status``."""
    import torch

    name = backend.name
    key = backend.dispatch_key
    if backend.module is not None:
        module = importlib.import_module(backend.module)
    else:
        module = types.ModuleType(
            f"torch.{name}", f"The '{name}' device (a torchplug simulated accelerator)."
        )

    def native() -> Any:
        if status.state is not BackendState.ACTIVE:
            from torchplug.loader import BackendLoadError, explain

            raise BackendLoadError(explain(status)) from status.error
        from torchplug import _C

        return _C

    def is_available() -> bool:
        return status.state is BackendState.ACTIVE and device_count() > 0

    def device_count() -> int:
        if status.state is not BackendState.ACTIVE:
            return 0
        return native().device_count(name)

    def _is_in_bad_fork() -> bool:
        return status.state is BackendState.ACTIVE and native().in_bad_fork(name)

    def _lazy_init() -> None:
        if _is_in_bad_fork():
            raise RuntimeError(
                f"Cannot re-initialize {name} in forked subprocess. To use {name} with "
                "multiprocessing, use the 'spawn' start method "
                "(multiprocessing.set_start_method('spawn'))."
            )
        native()

    def init() -> None:
        _lazy_init()

    def is_initialized() -> bool:
        return (
            status.state is BackendState.ACTIVE
            and native().is_initialized(name)
            and not _is_in_bad_fork()
        )

    def _index(device: Any = None, optional: bool = True) -> int:
        if device is None:
            return current_device()
        if isinstance(device, int):
            index = device
        else:
            parsed = torch.device(device)
            if parsed.type != name:
                raise ValueError(f"Expected a {name} device, got {parsed}.")
            index = current_device() if parsed.index is None else parsed.index
        count = device_count()
        if not 0 <= index < count:
            raise RuntimeError(
                f"Invalid device index {index} for '{name}': there are {count} devices "
                f"(valid indices 0..{count - 1})."
            )
        return index

    def current_device() -> int:
        return native().current_device(name)

    def set_device(device: Any) -> None:
        index = _index(device)
        native().set_device(name, index)

    class device:
        """Context manager that makes ``device`` current for the block."""

        def __init__(self, device: Any) -> None:
            self.index = -1 if device is None else _index(device)
            self.previous = -1

        def __enter__(self) -> None:
            if self.index >= 0:
                self.previous = current_device()
                set_device(self.index)

        def __exit__(self, *exc: object) -> None:
            if self.previous >= 0:
                set_device(self.previous)

    def device_of(obj: torch.Tensor) -> device:
        return device(obj.get_device() if obj.device.type == name else None)

    def synchronize(device: Any = None) -> None:
        native().synchronize(name, _index(device))

    def get_device_properties(device: Any = None) -> DeviceProperties:
        index = _index(device)
        return DeviceProperties(
            name=get_device_name(index),
            total_memory=native().capacity(name, index),
            multi_processor_count=os.cpu_count() or 1,
            major=1,
            minor=0,
        )

    def get_device_name(device: Any = None) -> str:
        return f"torchplug simulated {name} {_index(device)}"

    def get_device_capability(device: Any = None) -> tuple[int, int]:
        _index(device)
        return (1, 0)

    # Streams and events: torch.Stream / torch.Event work through the core's device guard.
    def current_stream(device: Any = None) -> torch.Stream:
        index = _index(device)
        return torch.Stream(
            stream_id=native().current_stream_id(key, index),
            device_index=index,
            device_type=native().device_type_id(key),
        )

    def default_stream(device: Any = None) -> torch.Stream:
        index = _index(device)
        return torch.Stream(
            stream_id=0, device_index=index, device_type=native().device_type_id(key)
        )

    def set_stream(stream: torch.Stream) -> None:
        """Makes ``stream`` current, and its device the current device, as
        ``torch.cuda.set_stream`` does."""
        set_device(stream.device_index)
        native().set_current_stream(key, stream.device_index, stream.stream_id)

    class StreamContext:
        """Makes ``stream`` and its device current for the block (``None``: no
        change), as ``torch.cuda.StreamContext``: on exit the current stream of
        both devices and the current device are restored."""

        def __init__(self, stream: torch.Stream | None) -> None:
            self.stream = stream
            self.previous: list[torch.Stream] = []

        def __enter__(self) -> None:
            if self.stream is None:
                return
            # Restored in reverse: the stream's device first, the original device last.
            self.previous = [current_stream()]
            if self.stream.device_index != self.previous[0].device_index:
                self.previous.insert(0, current_stream(self.stream.device_index))
            set_stream(self.stream)

        def __exit__(self, *exc: object) -> None:
            for previous in self.previous:
                set_stream(previous)
            self.previous = []

    def stream(stream: torch.Stream | None) -> StreamContext:
        return StreamContext(stream)

    def set_sync_debug_mode(debug_mode: int | str) -> None:
        """Warns (1, "warn") or raises (2, "error") when an operation makes the host
        wait for the device: blocking copies to or from the host, ``item()``.
        0 or "default" turns the checks off."""
        if isinstance(debug_mode, str):
            if debug_mode not in _SYNC_DEBUG_MODES:
                raise RuntimeError(
                    f"invalid value of debug_mode {debug_mode!r}, expected one of "
                    f"{', '.join(_SYNC_DEBUG_MODES)} (or 0, 1, 2)"
                )
            debug_mode = _SYNC_DEBUG_MODES.index(debug_mode)
        native().set_sync_debug_mode(key, int(debug_mode))

    def get_sync_debug_mode() -> int:
        return native().sync_debug_mode(key)

    def is_current_stream_capturing() -> bool:
        """Always False: the simulated devices have no graph capture."""
        return False

    def Stream(device: Any = None, priority: int = 0) -> torch.Stream:
        return torch.Stream(device=torch.device(name, _index(device)), priority=priority)

    def Event(
        enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        return torch.Event(device=torch.device(name, current_device()), enable_timing=enable_timing)

    def _sleep(milliseconds: float) -> None:
        """Queues a simulated kernel of the given duration on the current stream."""
        index = current_device()
        native().sleep_on_stream(
            name, index, native().current_stream_id(key, index), float(milliseconds)
        )

    # Memory.
    def memory_stats(device: Any = None) -> dict[str, int]:
        return dict(sorted(native().memory_stats(key, _index(device)).items()))

    def memory_allocated(device: Any = None) -> int:
        return memory_stats(device)["allocated_bytes.all.current"]

    def max_memory_allocated(device: Any = None) -> int:
        return memory_stats(device)["allocated_bytes.all.peak"]

    def memory_reserved(device: Any = None) -> int:
        return memory_stats(device)["reserved_bytes.all.current"]

    def max_memory_reserved(device: Any = None) -> int:
        return memory_stats(device)["reserved_bytes.all.peak"]

    def reset_peak_memory_stats(device: Any = None) -> None:
        native().reset_peak_memory_stats(key, _index(device))

    def reset_max_memory_allocated(device: Any = None) -> None:
        """The older spelling of ``reset_peak_memory_stats`` (as in torch.cuda)."""
        reset_peak_memory_stats(device)

    def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
        return _nested(memory_stats(device))

    # Pinned host memory (one allocator per device type, as torch.cuda's).
    def host_memory_stats() -> dict[str, int]:
        return dict(sorted(native().host_memory_stats(key).items()))

    def host_memory_stats_as_nested_dict() -> dict[str, Any]:
        return _nested(host_memory_stats())

    def reset_peak_host_memory_stats() -> None:
        native().reset_peak_host_memory_stats(key)

    def reset_accumulated_host_memory_stats() -> None:
        native().reset_accumulated_host_memory_stats(key)

    def _deprecated(old: str, new: str) -> None:
        warnings.warn(
            f"torch.{name}.{old} has been renamed to torch.{name}.{new}",
            FutureWarning,
            stacklevel=3,
        )

    def memory_cached(device: Any = None) -> int:
        _deprecated("memory_cached", "memory_reserved")
        return memory_reserved(device)

    def max_memory_cached(device: Any = None) -> int:
        _deprecated("max_memory_cached", "max_memory_reserved")
        return max_memory_reserved(device)

    def reset_max_memory_cached(device: Any = None) -> None:
        _deprecated("reset_max_memory_cached", "reset_peak_memory_stats")
        reset_peak_memory_stats(device)

    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        """Caps what this process may reserve on ``device`` at ``fraction`` of its
        capacity; allocations beyond it raise ``torch.OutOfMemoryError``."""
        if not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        native().set_memory_fraction(key, _index(device), float(fraction))

    def get_per_process_memory_fraction(device: Any = None) -> float:
        return native().memory_fraction(key, _index(device))

    def device_memory_used(device: Any = None) -> int:
        """Bytes of the device's capacity in use (by this process: the devices are simulated)."""
        free, total = mem_get_info(device)
        return total - free

    def can_device_access_peer(device: Any, peer_device: Any) -> bool:
        """True for any two valid devices: simulated devices copy to each other directly."""
        _index(device, optional=False)
        _index(peer_device, optional=False)
        return True

    def reset_accumulated_memory_stats(device: Any = None) -> None:
        native().reset_accumulated_memory_stats(key, _index(device))

    def empty_cache() -> None:
        native().empty_cache(key)

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        return tuple(native().mem_get_info(key, _index(device)))

    def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
        stats = memory_stats(device)
        rows = [f"torchplug memory summary, {name}:{_index(device)}"]
        for metric in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes"):
            current = stats[f"{metric}.all.current"]
            peak = stats[f"{metric}.all.peak"]
            rows.append(
                f"  {metric:<16} current {current / 2**20:10.2f} MiB   peak {peak / 2**20:10.2f} MiB"
            )
        rows.append(
            f"  allocations      {stats['allocation.all.current']} live, {stats['allocation.all.allocated']} total"
        )
        rows.append(f"  OOMs {stats['num_ooms']}, allocation retries {stats['num_alloc_retries']}")
        return "\n".join(rows)

    # Random number generation: per-device default generators in the core.
    def manual_seed(seed: int) -> None:
        native().manual_seed(key, current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)

    def manual_seed_all(seed: int) -> None:
        for index in range(device_count()):
            native().manual_seed(key, index, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)

    def seed() -> None:
        native().seed(key, current_device())

    def seed_all() -> None:
        first = native().seed(key, 0)
        for index in range(1, device_count()):
            native().manual_seed(key, index, first)

    def initial_seed() -> int:
        return native().initial_seed(key, current_device())

    def get_rng_state(device: Any = None) -> torch.Tensor:
        state = native().get_rng_state(key, _index(device))
        return torch.frombuffer(bytearray(state), dtype=torch.uint8)

    def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
        data = new_state.detach().cpu().contiguous().to(torch.uint8).numpy().tobytes()
        native().set_rng_state(key, _index(device), data)

    def get_rng_state_all() -> list[torch.Tensor]:
        return [get_rng_state(index) for index in range(device_count())]

    def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
        for index, state in enumerate(new_states):
            set_rng_state(state, index)

    # Autocast.
    def get_amp_supported_dtype() -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return True

    # Called by torch around RNG-sensitive code on HPU; device RNG lives on
    # the host here, so there is no context to switch.
    def set_rng_ctx(philox: str) -> None:
        del philox

    def unset_rng_ctx(philox: str) -> None:
        del philox

    exported = {
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
        "current_stream": current_stream,
        "default_stream": default_stream,
        "set_stream": set_stream,
        "stream": stream,
        "StreamContext": StreamContext,
        "is_current_stream_capturing": is_current_stream_capturing,
        "set_sync_debug_mode": set_sync_debug_mode,
        "get_sync_debug_mode": get_sync_debug_mode,
        "Stream": Stream,
        "Event": Event,
        "_sleep": _sleep,
        "memory_stats": memory_stats,
        "memory_allocated": memory_allocated,
        "max_memory_allocated": max_memory_allocated,
        "memory_reserved": memory_reserved,
        "max_memory_reserved": max_memory_reserved,
        "reset_peak_memory_stats": reset_peak_memory_stats,
        "reset_max_memory_allocated": reset_max_memory_allocated,
        "reset_accumulated_memory_stats": reset_accumulated_memory_stats,
        "memory_stats_as_nested_dict": memory_stats_as_nested_dict,
        "host_memory_stats": host_memory_stats,
        "host_memory_stats_as_nested_dict": host_memory_stats_as_nested_dict,
        "reset_peak_host_memory_stats": reset_peak_host_memory_stats,
        "reset_accumulated_host_memory_stats": reset_accumulated_host_memory_stats,
        "memory_cached": memory_cached,
        "max_memory_cached": max_memory_cached,
        "reset_max_memory_cached": reset_max_memory_cached,
        "set_per_process_memory_fraction": set_per_process_memory_fraction,
        "get_per_process_memory_fraction": get_per_process_memory_fraction,
        "device_memory_used": device_memory_used,
        "can_device_access_peer": can_device_access_peer,
        "empty_cache": empty_cache,
        "mem_get_info": mem_get_info,
        "OutOfMemoryError": torch.OutOfMemoryError,
        "memory_summary": memory_summary,
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed_all,
        "seed": seed,
        "seed_all": seed_all,
        "initial_seed": initial_seed,
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
        "get_rng_state_all": get_rng_state_all,
        "set_rng_state_all": set_rng_state_all,
        "get_amp_supported_dtype": get_amp_supported_dtype,
        "is_bf16_supported": is_bf16_supported,
        "set_rng_ctx": set_rng_ctx,
        "unset_rng_ctx": unset_rng_ctx,
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


# torch.cuda.set_sync_debug_mode's names, in the order of their numbers.
_SYNC_DEBUG_MODES = ("default", "warn", "error")


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b.c": 1}`` as ``{"a": {"b": {"c": 1}}}``: the ``*_as_nested_dict`` form."""
    nested: dict[str, Any] = {}
    for flat_key, value in flat.items():
        *path, leaf = flat_key.split(".")
        level = nested
        for part in path:
            level = level.setdefault(part, {})
        level[leaf] = value
    return nested


def add_tensor_methods(name: str) -> None:
    """``Tensor.<name>()`` and ``Module.<name>()`` for a device on an in-tree key.

    Upstream generates these only for the renamed PrivateUse1 backend.
    """
    import torch

    def tensor_to_device(
        self: torch.Tensor, device: Any = None, non_blocking: bool = False, **kwargs: Any
    ) -> torch.Tensor:
        if device is None:
            index = getattr(torch, name).current_device()
        elif isinstance(device, int):
            index = device
        else:
            index = torch.device(device).index or 0
        return self.to(torch.device(name, index), non_blocking=non_blocking, **kwargs)

    def module_to_device(self: torch.nn.Module, device: Any = None) -> torch.nn.Module:
        return self._apply(lambda t: tensor_to_device(t, device))

    if not hasattr(torch.Tensor, name):
        setattr(torch.Tensor, name, tensor_to_device)
    if not hasattr(torch.nn.Module, name):
        setattr(torch.nn.Module, name, module_to_device)
