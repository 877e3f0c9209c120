"""The ``npu`` device: a simulated torch_npu-like accelerator on PrivateUse1, built on torchplug.

``import torch`` activates it through the ``torch.backends`` entry point, as it
does torch_npu; importing ``torch_vnpu`` explicitly, before or after torch,
ends in the same single registration. Besides ``torch.npu`` it ships fused
vendor operators, ``torch.ops.npu.fast_gelu`` and ``torch.ops.npu.rms_norm``,
with autograd and torch.compile support, wrapped here as :func:`fast_gelu`
and :func:`rms_norm`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchplug import Backend

if TYPE_CHECKING:
    import torch

__all__ = ["backend", "fast_gelu", "rms_norm"]


def _setup(device_module: Any) -> None:
    # Runs only when npu is the active PrivateUse1 backend: the operator
    # library registers kernels for the PrivateUse1 key, which must not
    # land on another backend's device.
    del device_module
    from torch_vnpu import _ops

    _ops.load()


backend = Backend(name="npu", dispatch_key="privateuse1", distribution="torch_vnpu", setup=_setup)

# The torch.backends entry point. Importing torch_vnpu explicitly does the same.
_autoload = backend.autoload
_autoload()


def fast_gelu(x: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(1.702 * x)`` in one fused kernel (``torch.ops.npu.fast_gelu``)."""
    from torch_vnpu import _ops

    return _ops.operator("fast_gelu")(x)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(mean(x**2, -1) + eps) * weight`` in one fused kernel (``torch.ops.npu.rms_norm``)."""
    from torch_vnpu import _ops

    return _ops.operator("rms_norm")(x, weight, eps)
