"""The ``torchplug`` collective backend: torch.distributed on simulated devices.

Activating a backend registers its device with ``torch.distributed`` (a few
dictionary updates; ``import torch`` has already imported
``torch.distributed``). The native part, ``torchplug._distributed``, is
loaded only when a process group first creates the backend.

Each collective runs through a Gloo backend of the same group on CPU tensors,
after the work queued on the device's current stream has finished: real
processes, real sockets. Where device memory is host memory the CPU tensors
alias it (no copies); on a device whose memory the host cannot address (a
discrete device) they are host copies, and results are copied back once the
transport finished, as Gloo does for CUDA tensors.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

log = logging.getLogger("torchplug.distributed")

BACKEND_NAME = "torchplug"

_devices: list[str] = []


def devices() -> list[str]:
    """The device types the backend serves in this process, in activation order."""
    return list(_devices)


def register(device: str) -> None:
    """Makes the backend serve ``device`` and the default for it in ``init_process_group()``.

    Called by the loader when a backend activates. Never raises: a torch
    without distributed support simply gets no collective backend.
    """
    import torch

    try:
        if not torch.distributed.is_available():
            log.debug("torch.distributed is not available; no collective backend for '%s'", device)
            return
        if device not in _devices:
            _devices.append(device)
        torch.distributed.Backend.register_backend(BACKEND_NAME, _create, devices=list(_devices))
    except Exception:
        log.warning(
            "Could not register the '%s' collective backend for device '%s'",
            BACKEND_NAME,
            device,
            exc_info=True,
        )


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> Any:
    """The creator ``torch.distributed`` calls for each process group using the backend."""
    import torch.distributed as dist

    from torchplug import _C

    staged = [device for device in _devices if not _C.host_addressable(device)]
    if _C.strict_mode() and len(staged) < len(_devices):
        raise RuntimeError(
            f"The '{BACKEND_NAME}' collective backend cannot run with strict device memory "
            "(TORCHPLUG_STRICT_MEMORY): Gloo reads device memory from its own threads. "
            "Unset TORCHPLUG_STRICT_MEMORY for distributed runs."
        )
    _bind_local_rank()
    from torchplug import _distributed

    transport = dist.ProcessGroupGloo(dist.PrefixStore("transport/", store), rank, size, timeout)
    checks = dist.ProcessGroupGloo(dist.PrefixStore("checks/", store), rank, size, timeout)
    return _distributed.DeviceCollectives(transport, checks, rank, size, staged)


def _bind_local_rank() -> None:
    """Under torchrun, makes device LOCAL_RANK current unless the process chose one.

    Each rank should drive its own device, as on real hardware. A process
    still on device 0 with a non-zero LOCAL_RANK has not chosen; it gets device
    LOCAL_RANK of every device type the backend serves.
    """
    import torch

    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None or not local_rank.isdigit() or int(local_rank) == 0:
        return
    index = int(local_rank)
    for device in _devices:
        module = getattr(torch, device, None)
        if module is None or not module.is_available() or module.current_device() != 0:
            continue
        count = module.device_count()
        if index >= count:
            raise RuntimeError(
                f"LOCAL_RANK={index} needs {device} device {index}, but this process has "
                f"{count} simulated {device} devices. Start fewer processes per node, or "
                f"simulate more devices: TORCHPLUG_DEVICE_COUNT={index + 1}."
            )
        module.set_device(index)
        log.info("LOCAL_RANK=%d: %s device %d is now current", index, device, index)
