"""The ``npu`` device: a simulated torch_npu-like accelerator on PrivateUse1, built on torchplug.

``import torch`` activates it through the ``torch.backends`` entry point, as it
does torch_npu; importing ``torch_vnpu`` explicitly, before or after torch,
ends in the same single registration. Besides ``torch.npu`` it ships fused
vendor operators, ``torch.ops.npu.fast_gelu`` and ``torch.ops.npu.rms_norm``,
with autograd and torch.compile support, wrapped here as :func:`fast_gelu`
and :func:`rms_norm`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchplug import Backend, BackendState

if TYPE_CHECKING:
    import torch

__all__ = ["backend", "fast_gelu", "rms_norm"]


def _load_operators() -> None:
    # Before npu takes PrivateUse1: if the operator library cannot load, npu
    # fails without taking the key from another backend that works. It runs
    # only for the backend about to take the key, so its PrivateUse1 kernels
    # never land on another backend's device.
    from torch_vnpu import _ops

    _ops.load()


backend = Backend(
    name="npu", dispatch_key="privateuse1", distribution="torch_vnpu", prepare=_load_operators
)

# The torch.backends entry point of old installs; importing torch_vnpu
# explicitly does the same as autoloading it.
_autoload = backend.autoload
_status = _autoload()


def _operator(name: str) -> Callable[..., Any]:
    from torch_vnpu import _ops

    if _status.state is BackendState.SHADOWED:
        # Another distribution's npu holds the name: its status is not ours.
        from torchplug import explain

        raise _ops.OperatorsUnavailableError(
            f"torch_vnpu's operators are registered when its npu backend is active. {explain(_status)}"
        )
    return _ops.operator(name)


def fast_gelu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x * sigmoid(1.702 * x)`` in one fused kernel (``torch.ops.npu.fast_gelu``).

    With ``out``, the result is written there (resized like ``x``); ``out`` may
    be ``x`` itself, but not a tensor partly sharing its memory.
    """
    if out is None:
        return _operator("fast_gelu")(x)
    return _operator("fast_gelu").out(x, out=out)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(mean(x**2, -1) + eps) * weight`` in one fused kernel (``torch.ops.npu.rms_norm``)."""
    return _operator("rms_norm")(x, weight, eps)
