"""HF accelerate trains on the active torchplug device.

accelerate picks its device in ``PartialState.default_device`` from a fixed
list of vendor modules (``torch_npu``, ``habana_frameworks``, ...) and falls
back to the CPU; ``ACCELERATE_TORCH_DEVICE`` is its only other input. Where
it would fall back although ``torch.accelerator`` is a torchplug device, it
gets that device instead. Its fp16 ``GradScaler`` comes from the same list
(``get_grad_scaler`` builds CUDA's, which turns itself off without CUDA), so
on a torchplug device it is the device's own ``torch.amp.GradScaler``.

What is left as accelerate decides: ``ACCELERATE_TORCH_DEVICE``,
``Accelerator(cpu=True)``, CUDA and the vendors it knows, and fp16 on device
types outside the list in ``Accelerator.__init__`` (it refuses ``foo``).
"""

from __future__ import annotations

import functools
import logging
import types
from typing import Any

from torchplug.integrations import devices

log = logging.getLogger("torchplug.integrations")


def install(accelerator_module: types.ModuleType) -> None:
    """Adapts ``accelerate.accelerator`` and the ``PartialState`` it imports."""
    from accelerate.state import PartialState

    devices.wrap(PartialState, "default_device", _default_device)
    devices.wrap(accelerator_module, "get_grad_scaler", _grad_scaler)


def _default_device(original: property) -> property:
    def default_device(state: Any) -> Any:
        chosen = original.fget(state)
        device = devices.accelerator() if chosen.type == "cpu" else None
        if device is None:
            return chosen
        _announce(device)
        import torch

        return torch.device(device)

    return property(default_device, doc=original.__doc__)


@functools.cache
def _announce(device: str) -> None:
    log.info(
        "accelerate trains on '%s', torch.accelerator's device (torchplug); "
        "ACCELERATE_TORCH_DEVICE=cpu or Accelerator(cpu=True) keeps it on the CPU",
        device,
    )


def _grad_scaler(original: Any) -> Any:
    @functools.wraps(original)
    def get_grad_scaler(distributed_type: Any = None, **kwargs: Any) -> Any:
        import torch
        from accelerate.state import PartialState
        from accelerate.utils import DistributedType

        device = PartialState().device
        if device.type not in devices.active() or distributed_type == DistributedType.FSDP:
            return original(distributed_type, **kwargs)
        return torch.amp.GradScaler(device.type, **kwargs)

    return get_grad_scaler
