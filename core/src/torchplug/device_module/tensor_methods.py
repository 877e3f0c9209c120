"""``Tensor.<name>()`` and ``Module.<name>()`` for a device on an in-tree key.

Upstream generates these only for the renamed PrivateUse1 backend.
"""

from __future__ import annotations

from typing import Any

import torch


def add_tensor_methods(name: str) -> None:
    """Adds ``Tensor.<name>()`` and ``Module.<name>()`` unless torch has them."""

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
