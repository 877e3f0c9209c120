"""``torch.manual_seed`` and ``torch.seed`` reach every torchplug device.

Upstream seeds CUDA, MPS, XPU, MTIA and the renamed PrivateUse1 backend, the
last through ``torch.random._seed_custom_device``. A device on an in-tree key
such as HPU is left out, so its random ops would not follow
``torch.manual_seed``. That one private hook is extended, once, to seed the
devices registered here as well; everything else about seeding is upstream's.
Verified in torch 2.14.1 and 2.15.0 (``torch.manual_seed`` and ``torch.seed``
call it with the seed); a torch without it keeps the device working and says
once that ``torch.<name>.manual_seed`` must be called instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("torchplug")

_devices: list[str] = []


def seed_with_torch(name: str) -> None:
    """Make ``torch.manual_seed``/``torch.seed`` seed every device of ``torch.<name>``."""
    import torch.random

    if name in _devices:
        return
    _devices.append(name)
    if len(_devices) == 1:
        upstream = getattr(torch.random, "_seed_custom_device", None)
        if upstream is None:
            log.warning(
                "torch %s has no torch.random._seed_custom_device, so torch.manual_seed does "
                "not seed '%s': call torch.%s.manual_seed as well.",
                torch.__version__,
                name,
                name,
            )
            return
        torch.random._seed_custom_device = _seeding_also(upstream)


def _seeding_also(upstream: Callable[[int], None]) -> Callable[[int], None]:
    import torch

    def seed_custom_devices(seed: int) -> None:
        upstream(seed)
        for name in _devices:
            module = getattr(torch, name, None)
            if module is not None and module.is_available() and not module._is_in_bad_fork():
                module.manual_seed_all(seed)

    return seed_custom_devices
