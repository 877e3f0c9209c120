"""``torch.manual_seed`` and ``torch.seed`` reach every torchplug device.

Upstream seeds CUDA, MPS, XPU, MTIA and the renamed PrivateUse1 backend, the
last through ``torch.random._seed_custom_device``. A device on an in-tree key
such as HPU is left out, so its random ops would not follow
``torch.manual_seed``. That one private hook is extended, once, to seed the
devices registered here as well; everything else about seeding is upstream's.
"""

from __future__ import annotations

from collections.abc import Callable

_devices: list[str] = []


def seed_with_torch(name: str) -> None:
    """Make ``torch.manual_seed``/``torch.seed`` seed every device of ``torch.<name>``."""
    import torch.random

    if name in _devices:
        return
    _devices.append(name)
    if len(_devices) == 1:
        torch.random._seed_custom_device = _seeding_also(torch.random._seed_custom_device)


def _seeding_also(upstream: Callable[[int], None]) -> Callable[[int], None]:
    import torch

    def seed_custom_devices(seed: int) -> None:
        upstream(seed)
        for name in _devices:
            module = getattr(torch, name, None)
            if module is not None and module.is_available() and not module._is_in_bad_fork():
                module.manual_seed_all(seed)

    return seed_custom_devices
