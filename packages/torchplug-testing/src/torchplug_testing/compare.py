"""Moving values between the CPU and the device under test, and comparing them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def to_device(value: Any, device: torch.device | str) -> Any:
    """``value`` with every tensor copied to ``device``, strides and storage offsets kept.

    Autograd leaves stay leaves that require grad. Arguments naming the CPU as a
    device (``"cpu"``, ``torch.device("cpu")``) are redirected to ``device``.
    """
    return _transfer(value, torch.device(device), "cpu")


def to_cpu_reference(value: Any, device: torch.device | str) -> Any:
    """The CPU twin of device-side arguments: tensors copied (layout kept), ``device`` named ``cpu``."""
    return _transfer(value, torch.device("cpu"), torch.device(device).type)


def to_cpu(value: Any) -> Any:
    """``value`` with every tensor copied to the CPU, detached."""
    return _map_tensors(value, lambda tensor: tensor.detach().cpu())


def as_leaves(value: Any) -> Any:
    """``value`` with every tensor replaced by an alias of it that is an autograd
    leaf (and requires grad if the tensor did)."""
    return _map_tensors(value, lambda tensor: tensor.detach().requires_grad_(tensor.requires_grad))


def _map_leaves(value: Any, convert: Callable[[Any], Any]) -> Any:
    """``value`` rebuilt with ``convert`` applied to everything in it that is not a
    named tuple, list, tuple or dict (of a dict, to the values)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_map_leaves(item, convert) for item in value))
    if isinstance(value, list | tuple):
        return type(value)(_map_leaves(item, convert) for item in value)
    if isinstance(value, dict):
        return {key: _map_leaves(item, convert) for key, item in value.items()}
    return convert(value)


def _map_tensors(value: Any, convert: Callable[[torch.Tensor], Any]) -> Any:
    return _map_leaves(
        value, lambda leaf: convert(leaf) if isinstance(leaf, torch.Tensor) else leaf
    )


def _transfer(value: Any, target: torch.device, source_type: str) -> Any:
    def transfer_leaf(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            return _copy_tensor(leaf, target)
        if (isinstance(leaf, torch.device) and leaf.type == source_type) or (
            isinstance(leaf, str) and leaf.split(":")[0] == source_type
        ):
            return target if isinstance(leaf, torch.device) else str(target)
        return leaf

    return _map_leaves(value, transfer_leaf)


def _copy_tensor(tensor: torch.Tensor, target: torch.device) -> torch.Tensor:
    source = tensor.detach()
    copied = None
    if source.layout == torch.strided and not (source.is_conj() or source.is_neg()):
        # Copy the whole storage and rebuild the view on it, so kernels see the
        # same strides, offset and out-of-view memory on both sides.
        try:
            storage = source.untyped_storage()
            flat = source.new_empty(0).set_(
                storage, 0, (storage.nbytes() // source.element_size(),), (1,)
            )
            copied = flat.to(target).as_strided(
                source.shape, source.stride(), source.storage_offset()
            )
        except (RuntimeError, NotImplementedError):
            copied = None
    if copied is None:
        copied = source.to(target)
    copied = copied.detach()
    if tensor.requires_grad:
        copied.requires_grad_(True)
    return copied


def assert_matches_cpu(actual: Any, expected: Any, **tolerances: Any) -> None:
    """Asserts a device result equals the CPU's (values, dtypes, shapes; NaN equals NaN)."""
    torch.testing.assert_close(
        to_cpu(actual), to_cpu(expected), equal_nan=True, check_device=False, **tolerances
    )


def tensors_of(value: Any) -> list[torch.Tensor]:
    """Every tensor in a (nested) result, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [tensor for item in value for tensor in tensors_of(item)]
    if isinstance(value, dict):
        return [tensor for item in value.values() for tensor in tensors_of(item)]
    return []


def check_against_cpu(
    function: Any, inputs: tuple[Any, ...], device: torch.device | str, **tolerances: Any
) -> Any:
    """Runs ``function(*inputs)`` on the CPU and on ``device``; asserts equal results.

    Returns the device result. Inputs are created on the CPU by the caller.
    """
    expected = function(*inputs)
    actual = function(*to_device(inputs, device))
    for tensor in tensors_of(actual):
        assert tensor.device.type == torch.device(device).type, (
            f"result on {tensor.device}, expected on {device}"
        )
    assert_matches_cpu(actual, expected, **tolerances)
    return actual
