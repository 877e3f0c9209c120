"""``vanilla``: a minimal PrivateUse1 backend in pure Python that is not built on torchplug.

The conformance suite's test of a backend that owes nothing to torchplug loads
it into a child pytest (and into the crash guard's worker) as a plugin:
``pytest -p vanilla_backend --device vanilla``, with this directory on the
path and ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` so that no torchplug backend
claims PrivateUse1 first. Importing the module registers the backend.

A ``vanilla`` tensor is a wrapper subclass (no storage of its own) around a CPU
tensor, its payload. Every operator on it runs on the payload, through
``__torch_dispatch__``; the few that torch sends to the PrivateUse1 key itself
(factories, and copies made with the Python key excluded) are registered for
that key with ``torch.library``. torch's Python hooks for PrivateUse1 give it a
device guard, so autograd and ``torch.accelerator`` see the device.

Its device module is deliberately minimal: what torch needs to seed and count
devices, nothing more. No synchronize, streams, memory statistics, RNG state or
device properties and no autocast: the suite must report each of those as a
failure of the test that needs it, naming the function, and run everything else.
It also does not refuse CPU operands mixed with its own (a real gap the suite
must find), but it does refuse a device index it does not have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

NAME = "vanilla"
DEVICE_COUNT = 1


class VanillaModule:
    """``torch.vanilla``: only what torch itself calls for a PrivateUse1 device."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return DEVICE_COUNT

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        # Random numbers are drawn on the CPU (from the payloads), which
        # torch.manual_seed seeds already.
        del seed


class VanillaHooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, device_index: int) -> bool:
        return 0 <= device_index < DEVICE_COUNT

    def is_built(self) -> bool:
        return True


class VanillaGuard(torch._C._acc.DeviceGuard):
    def type_(self) -> Any:
        return torch._C._autograd.DeviceType.PrivateUse1


class VanillaTensor(torch.Tensor):
    """A tensor on the vanilla device: the metadata of its CPU payload, on ``vanilla:0``."""

    payload: torch.Tensor

    @staticmethod
    def __new__(cls, payload: torch.Tensor) -> VanillaTensor:
        tensor = torch.Tensor._make_wrapper_subclass(
            cls,
            payload.shape,
            strides=payload.stride(),
            storage_offset=payload.storage_offset(),
            dtype=payload.dtype,
            layout=payload.layout,
            device=torch.device(NAME, 0),
            requires_grad=False,
        )
        tensor.payload = payload
        return tensor

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return f"VanillaTensor({self.payload!r})"

    @classmethod
    def __torch_dispatch__(
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return run_on_payloads(func, args, kwargs or {})


def run_on_payloads(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs ``func`` on the CPU payloads of its vanilla arguments; its new tensors are
    vanilla tensors unless the call asked for another device."""
    kwargs = dict(kwargs)
    requested = kwargs.get("device")
    on_vanilla: bool | None = None
    if requested is not None:
        requested = torch.device(requested)
        on_vanilla = requested.type == NAME
        if on_vanilla:
            check_index(requested)
            kwargs["device"] = torch.device("cpu")
    leaves, _ = tree_flatten((args, kwargs))
    # The tensors an in-place or out= call returns are its arguments, which stay theirs.
    wrappers = {id(leaf.payload): leaf for leaf in leaves if isinstance(leaf, VanillaTensor)}
    host_arguments = {id(leaf) for leaf in leaves if type(leaf) is torch.Tensor}
    if on_vanilla is None:
        on_vanilla = bool(wrappers)

    def unwrap(value: Any) -> Any:
        return value.payload if isinstance(value, VanillaTensor) else value

    def wrap(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) in wrappers:
            return wrappers[id(value)]
        if id(value) in host_arguments or not on_vanilla:
            return value
        return VanillaTensor(value)

    return tree_map(wrap, func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs)))


def check_index(device: torch.device) -> None:
    if device.index is not None and not 0 <= device.index < DEVICE_COUNT:
        raise RuntimeError(
            f"invalid device index {device.index}: {NAME} has {DEVICE_COUNT} device(s)"
        )


def copy_from(source: torch.Tensor, target: torch.Tensor, non_blocking: bool = False) -> Any:
    """``aten::_copy_from``: the copy torch makes with the Python key excluded (``torch.tensor``)."""
    del non_blocking
    value = source.payload if isinstance(source, VanillaTensor) else source
    if isinstance(target, VanillaTensor):
        target.payload.copy_(value)
    else:
        target.copy_(value)
    return target


def delegate(overload: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        return run_on_payloads(overload, args, kwargs)

    return kernel


def register() -> None:
    torch.utils.rename_privateuse1_backend(NAME)
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module(NAME, VanillaModule)
    torch._C._acc.register_python_privateuseone_hook(VanillaHooks())
    torch._C._acc.register_python_privateuseone_device_guard(VanillaGuard())
    # Kernels of the PrivateUse1 key: the calls that reach it without a vanilla
    # tensor's Python key (factories), or with that key excluded.
    library = torch.library.Library("aten", "IMPL")
    for name, overload in (
        ("empty.memory_format", torch.ops.aten.empty.memory_format),
        ("empty_strided", torch.ops.aten.empty_strided.default),
        ("_copy_from_and_resize", torch.ops.aten._copy_from_and_resize.default),
    ):
        library.impl(name, delegate(overload), "PrivateUse1")
    library.impl("_copy_from", copy_from, "PrivateUse1")
    _LIBRARIES.append(library)


# The registrations last as long as their Library objects.
_LIBRARIES: list[torch.library.Library] = []

register()
