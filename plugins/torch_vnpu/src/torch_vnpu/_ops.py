"""The Python half of the npu operators: loading the C++ library, autograd, fake kernels.

The C++ extension ``torch_vnpu._C`` defines the schemas and the fused CPU and
npu kernels (``torch.ops.npu.*``). Here each forward operator gets its
backward formula (itself a fused C++ operator) and each operator a fake
implementation, which torch.compile uses to trace shapes without running
kernels.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

import torch

import torchplug

_lock = threading.Lock()
_loaded = False


class OperatorsUnavailableError(RuntimeError):
    """The npu operators were used while the npu backend is not active in this process."""


def load() -> None:
    """Registers the npu operators with torch; idempotent."""
    global _loaded
    with _lock:
        if _loaded:
            return
        from torch_vnpu import _build_info

        torchplug.check_build("torch_vnpu", _build_info)
        importlib.import_module("torch_vnpu._C")  # its static initializers define torch.ops.npu.*
        _register_fake_kernels()
        _register_autograd()
        _loaded = True


def operator(name: str) -> Callable[..., Any]:
    """``torch.ops.npu.<name>``, or a clear error if the npu backend is not active."""
    if not _loaded:
        status = torchplug.statuses().get("npu")
        reason = status.reason if status is not None else "torch_vnpu was never activated"
        raise OperatorsUnavailableError(
            f"torch_vnpu's operators are registered when the npu backend is active, and it is not: "
            f"{reason.rstrip('.')}. Run `torchplug doctor` for details."
        )
    return getattr(torch.ops.npu, name)


def _register_fake_kernels() -> None:
    # Kernels return fresh contiguous tensors; new_empty matches that, where
    # empty_like would copy a non-contiguous input's strides.
    @torch.library.register_fake("npu::fast_gelu")
    def _(x: torch.Tensor) -> torch.Tensor:
        torch._check(
            x.dtype.is_floating_point, lambda: "npu::fast_gelu: input must be floating-point"
        )
        return x.new_empty(x.shape)

    @torch.library.register_fake("npu::fast_gelu.out")
    def _(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return out

    @torch.library.register_fake("npu::fast_gelu_backward")
    def _(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        torch._check(grad.shape == x.shape, lambda: "npu::fast_gelu_backward: shapes differ")
        return x.new_empty(x.shape)

    @torch.library.register_fake("npu::rms_norm")
    def _(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        _check_rms_norm(x, weight)
        return x.new_empty(x.shape)

    @torch.library.register_fake("npu::rms_norm_backward")
    def _(
        grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_rms_norm(x, weight)
        return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _check_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> None:
    torch._check(x.dim() >= 1, lambda: "npu::rms_norm: input must have at least one dimension")
    torch._check(
        weight.dim() == 1 and weight.shape[0] == x.shape[-1],
        lambda: (
            f"npu::rms_norm: weight must have shape ({x.shape[-1]},), got {tuple(weight.shape)}"
        ),
    )
    torch._check(weight.dtype == x.dtype, lambda: "npu::rms_norm: weight and input dtypes differ")


def _register_autograd() -> None:
    def save_input(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.save_for_backward(inputs[0])

    def fast_gelu_backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return torch.ops.npu.fast_gelu_backward(grad, x)

    torch.library.register_autograd("npu::fast_gelu", fast_gelu_backward, setup_context=save_input)

    def save_rms_norm_inputs(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        x, weight, eps = inputs
        ctx.save_for_backward(x, weight)
        ctx.eps = eps

    def rms_norm_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x, weight = ctx.saved_tensors
        grad_x, grad_weight = torch.ops.npu.rms_norm_backward(grad, x, weight, ctx.eps)
        return grad_x, grad_weight, None

    torch.library.register_autograd(
        "npu::rms_norm", rms_norm_backward, setup_context=save_rms_norm_inputs
    )
