"""The HF Trainer trains on the device accelerate chose, and in bf16 there.

``TrainingArguments._setup_devices`` asks accelerate's ``PartialState`` for
the device, then, for a single process, overrides it from its own fixed list
of vendor modules, ending in CUDA or ``ACCELERATE_TORCH_DEVICE`` or the CPU;
where it would override a torchplug device accelerate chose
(:mod:`torchplug.integrations.accelerate`) with the CPU, it keeps accelerate's.
``bf16=True`` is refused unless ``is_torch_bf16_gpu_available()``, which
knows the same list; on a torchplug device that supports bf16 it is accepted.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from torchplug.integrations import devices

# The variable that names the Trainer's device when no vendor module does.
DEVICE_VARIABLE = "ACCELERATE_TORCH_DEVICE"


def install(training_args: types.ModuleType) -> None:
    """Adapts ``transformers.training_args``."""
    devices.wrap(training_args.TrainingArguments, "_setup_devices", _setup_devices)
    devices.wrap(training_args, "is_torch_bf16_gpu_available", _bf16_available)


def _setup_devices(original: functools.cached_property) -> functools.cached_property:
    def setup_devices(args: Any) -> Any:
        chosen = original.func(args)
        state = getattr(args, "distributed_state", None)
        if chosen.type != "cpu" or args.use_cpu or state is None:
            return chosen
        return state.device if state.device.type in devices.active() else chosen

    return functools.cached_property(setup_devices)


def _bf16_available(original: Callable[[], bool]) -> Callable[[], bool]:
    @functools.wraps(original)
    def is_torch_bf16_gpu_available() -> bool:
        if original():
            return True
        device = devices.training_device(DEVICE_VARIABLE)
        if device is None:
            return False
        import torch

        return bool(getattr(torch, device).is_bf16_supported())

    return is_torch_bf16_gpu_available
