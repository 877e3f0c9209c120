"""Device and pinned host memory: statistics, limits, the caching allocator's
cache (``torch.cuda.memory``)."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from torchplug.device_module._device import BoundDevice

# The metrics memory_summary() shows, from memory_stats()' "<metric>.all.*" keys.
_SUMMARY_METRICS = ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes")


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b.c": 1}`` as ``{"a": {"b": {"c": 1}}}``: the ``*_as_nested_dict`` form."""
    tree: dict[str, Any] = {}
    for flat_key, value in flat.items():
        *path, leaf = flat_key.split(".")
        level = tree
        for part in path:
            level = level.setdefault(part, {})
        level[leaf] = value
    return tree


def functions(bound: BoundDevice) -> dict[str, Any]:
    """The memory part of ``torch.<name>``, by attribute name."""
    name = bound.name
    key = bound.key

    def memory_stats(device: Any = None) -> dict[str, int]:
        return dict(sorted(bound.native().memory_stats(key, bound.index(device)).items()))

    def memory_allocated(device: Any = None) -> int:
        return memory_stats(device)["allocated_bytes.all.current"]

    def max_memory_allocated(device: Any = None) -> int:
        return memory_stats(device)["allocated_bytes.all.peak"]

    def memory_reserved(device: Any = None) -> int:
        return memory_stats(device)["reserved_bytes.all.current"]

    def max_memory_reserved(device: Any = None) -> int:
        return memory_stats(device)["reserved_bytes.all.peak"]

    def reset_peak_memory_stats(device: Any = None) -> None:
        bound.native().reset_peak_memory_stats(key, bound.index(device))

    def reset_max_memory_allocated(device: Any = None) -> None:
        """The older spelling of ``reset_peak_memory_stats`` (as in torch.cuda)."""
        reset_peak_memory_stats(device)

    def reset_accumulated_memory_stats(device: Any = None) -> None:
        bound.native().reset_accumulated_memory_stats(key, bound.index(device))

    def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
        return nested(memory_stats(device))

    # Pinned host memory (one allocator per device type, as torch.cuda's).
    def host_memory_stats() -> dict[str, int]:
        return dict(sorted(bound.native().host_memory_stats(key).items()))

    def host_memory_stats_as_nested_dict() -> dict[str, Any]:
        return nested(host_memory_stats())

    def reset_peak_host_memory_stats() -> None:
        bound.native().reset_peak_host_memory_stats(key)

    def reset_accumulated_host_memory_stats() -> None:
        bound.native().reset_accumulated_host_memory_stats(key)

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
        bound.native().set_memory_fraction(key, bound.index(device), float(fraction))

    def get_per_process_memory_fraction(device: Any = None) -> float:
        return bound.native().memory_fraction(key, bound.index(device))

    def device_memory_used(device: Any = None) -> int:
        """Bytes of the device's capacity in use (by this process: the devices are simulated)."""
        free, total = mem_get_info(device)
        return total - free

    def empty_cache() -> None:
        bound.native().empty_cache(key)

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        return tuple(bound.native().mem_get_info(key, bound.index(device)))

    def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
        """A few lines of the device's memory statistics. ``abbreviated`` changes
        nothing: the summary is torch.cuda's abbreviated form already (one
        allocator pool, so no per-pool rows to leave out)."""
        stats = memory_stats(device)
        rows = [f"torchplug memory summary, {name}:{bound.index(device)}"]
        for metric in _SUMMARY_METRICS:
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

    return {
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
        "empty_cache": empty_cache,
        "mem_get_info": mem_get_info,
        "OutOfMemoryError": torch.OutOfMemoryError,
        "memory_summary": memory_summary,
    }
