"""Moving values between the CPU and the device under test, and comparing them."""

from __future__ import annotations

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
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(to_cpu(item) for item in value))
    if isinstance(value, list | tuple):
        return type(value)(to_cpu(item) for item in value)
    if isinstance(value, dict):
        return {key: to_cpu(item) for key, item in value.items()}
    return value


def as_leaves(value: Any) -> Any:
    """``value`` with every tensor replaced by an alias of it that is an autograd
    leaf (and requires grad if the tensor did)."""
    if isinstance(value, torch.Tensor):
        return value.detach().requires_grad_(value.requires_grad)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(as_leaves(item) for item in value))
    if isinstance(value, list | tuple):
        return type(value)(as_leaves(item) for item in value)
    if isinstance(value, dict):
        return {key: as_leaves(item) for key, item in value.items()}
    return value


def _transfer(value: Any, target: torch.device, source_type: str) -> Any:
    if isinstance(value, torch.Tensor):
        return _copy_tensor(value, target)
    if (isinstance(value, torch.device) and value.type == source_type) or (
        isinstance(value, str) and value.split(":")[0] == source_type
    ):
        return target if isinstance(value, torch.device) else str(target)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_transfer(item, target, source_type) for item in value))
    if isinstance(value, list | tuple):
        return type(value)(_transfer(item, target, source_type) for item in value)
    if isinstance(value, dict):
        return {key: _transfer(item, target, source_type) for key, item in value.items()}
    return value


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
