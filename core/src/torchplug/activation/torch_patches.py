"""What activation changes in the ``torch`` module: an inactive backend says why,
and hpu answers device-generic calls on a torch build that refuses it as accelerator.

The first two are plain attribute and ``sys.modules`` entries torch looks up
by name. The third replaces torch functions, listed in ``HPU_REPLACED``: only
in a process where torch raises "Cannot have both HPU and <accelerator>."
(:func:`hpu_beside_compiled_accelerator`), and each replacement calls torch's
own function first, answering differently only when it raises that error.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

from torchplug.activation import records
from torchplug.backend import BackendState, BackendStatus
from torchplug.device_kind import kind_of
from torchplug.errors import BackendLoadError, DeviceUnavailableError, explain

log = logging.getLogger("torchplug")


@functools.cache
def explain_missing_device_modules(torch: types.ModuleType) -> None:
    """Makes ``torch.<name>`` of an inactive backend raise why, instead of
    "module 'torch' has no attribute". Torch looks its missing attributes up
    in the module's ``__getattr__``; this one answers for torchplug's device
    names first and defers to torch's for everything else."""
    torch_getattr = torch.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        status = records.by_device.get(name)
        if status is not None and status.state not in (BackendState.ACTIVE, BackendState.PENDING):
            raise DeviceUnavailableError(f"torch.{name} is unavailable. {explain(status)}")
        if torch_getattr is None:
            raise AttributeError(f"module 'torch' has no attribute '{name}'")
        return torch_getattr(name)

    torch.__getattr__ = __getattr__


def stand_in_device_module(torch: types.ModuleType, status: BackendStatus) -> None:
    """Tensor creation on a device torch knows by itself (``hpu``) imports
    ``torch.<name>`` to initialise it; when that backend is not active, a
    stand-in there raises why instead of torch's "no module named"."""
    name = status.backend.name
    if not kind_of(status.backend.dispatch_key).known_to_torch:
        return
    if f"torch.{name}" in sys.modules or name in torch.__dict__:
        return
    module = types.ModuleType(f"torch.{name}", f"Stand-in for the inactive '{name}' backend.")

    def _lazy_init() -> None:
        raise BackendLoadError(explain(status)) from status.error

    module._lazy_init = _lazy_init  # type: ignore[attr-defined]
    module.is_available = lambda: False  # type: ignore[attr-defined]
    module.device_count = lambda: 0  # type: ignore[attr-defined]
    sys.modules[f"torch.{name}"] = module


# --- hpu beside a compiled-in accelerator -------------------------------------
#
# at::accelerator::getAccelerator() checks the compile-time accelerators (CUDA,
# XPU, ..., HPU) and raises "Cannot have both HPU and cuda." when the HPU hooks
# are registered in a torch built with another one: every torch.accelerator
# call, and what builds on it, raises while no PrivateUse1 backend (which torch
# puts first) is active. Torch's C++ callers (the autograd engine,
# torch.Stream(device=...), torch.Event() without a device, factories with
# pin_memory=True) cannot be reached from Python and keep raising.

# What getAccelerator raises; group 1 or 2 is the other accelerator. A pattern
# string rather than a module-level compile: only an error needs it, and
# compiling it would add to every ``import torch``.
_CONFLICT = r"Cannot have both (?:HPU and (\w+)|(\w+) and HPU)\."
# Torch releases whose symbols below were checked: each exists (a builtin of
# torch._C, a method of torch._C.TensorBase) and its Python callers in
# torch.accelerator, torch.amp.autocast_mode and torch.utils.data are unchanged.
HPU_VERIFIED_IN = ("2.14.1", "2.15.0")


class AcceleratorUnreachableError(RuntimeError):
    """A ``torch.accelerator`` call that cannot reach hpu on this torch build."""


class Replaced(NamedTuple):
    """A torch function replaced in a process with hpu beside a compiled-in accelerator."""

    owner: str  # "torch._C", "torch" or "torch.Tensor"
    name: str
    why: str
    # Given torch's function and the device's name ("hpu"), what replaces it.
    make: Callable[[Callable[..., Any], str], Callable[..., Any]]

    @property
    def symbol(self) -> str:
        return f"{self.owner}.{self.name}"


def conflicting_accelerator(error: BaseException) -> str | None:
    """The accelerator ``error`` says HPU cannot coexist with, or None for another error."""
    match = re.search(_CONFLICT, str(error)) if isinstance(error, RuntimeError) else None
    return None if match is None else (match.group(1) or match.group(2))


def limitation(accelerator: str) -> str:
    """What torch allows for hpu beside ``accelerator``, as doctor and the errors say it."""
    import torch

    return (
        f"torch {torch.__version__} is built with {accelerator}, so torch.accelerator cannot "
        f"make hpu its accelerator (torch raises 'Cannot have both HPU and {accelerator}.'). "
        "With hpu the only torchplug backend, torch.accelerator reports no accelerator "
        "(current_accelerator() None, is_available() False, memory statistics 0), "
        "Tensor.pin_memory() and torch.autocast('hpu') use hpu, and backward on hpu cannot "
        "run; beside a PrivateUse1 backend, that backend is the accelerator. "
        "Use device='hpu' and torch.hpu explicitly (see docs/hpu.md)"
    )


_told_lock = threading.Lock()
_told = False


def _tell_once(accelerator: str) -> None:
    """Warns, once per process, that device-generic code will not find hpu."""
    global _told
    with _told_lock:
        first, _told = not _told, True
    if first:
        log.warning("torchplug: %s.", limitation(accelerator))


def _answering_conflict(
    original: Callable[..., Any], on_conflict: Callable[[str, RuntimeError], Any]
) -> Callable[..., Any]:
    """``original``, except that torch's "Cannot have both HPU and <accelerator>."
    is answered by ``on_conflict(accelerator, error)``; every other error passes."""

    @functools.wraps(original)
    def replacement(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except RuntimeError as error:
            accelerator = conflicting_accelerator(error)
            if accelerator is None:
                raise
            return on_conflict(accelerator, error)

    return replacement


def _no_accelerator(answer: Callable[[], Any]) -> Callable[..., Any]:
    """A replacement answering ``answer()`` ("no accelerator") instead of the conflict."""

    def make(original: Callable[..., Any], device: str) -> Callable[..., Any]:
        def no_accelerator(accelerator: str, error: RuntimeError) -> Any:
            _tell_once(accelerator)
            return answer()

        return _answering_conflict(original, no_accelerator)

    return make


# torch._C._accelerator_<key>: the torch.accelerator function that calls it, and
# the function of the device module (torch.hpu) to call instead.
_INSTEAD = {
    "getDeviceIndex": ("current_device_index", "current_device"),
    "setDeviceIndex": ("set_device_index", "set_device"),
    "exchangeDevice": ("device_index", "device"),
    "maybeExchangeDevice": ("device_index", "device"),
    "getStream": ("current_stream", "current_stream"),
    "setStream": ("set_stream", "set_stream"),
    "synchronizeDevice": ("synchronize", "synchronize"),
    "getMemoryInfo": ("get_memory_info", "mem_get_info"),
    "getDeviceStats": ("memory_stats", "memory_stats"),
    "resetPeakStats": ("reset_peak_memory_stats", "reset_peak_memory_stats"),
    "resetAccumulatedStats": ("reset_accumulated_memory_stats", "reset_accumulated_memory_stats"),
    "emptyCache": ("empty_cache", "empty_cache"),
    "emptyHostCache": ("empty_host_cache", "empty_cache"),
    "getDeviceCapability": ("get_device_capability", "get_device_properties"),
    "getDefaultGenerator": ("random.initial_seed", "initial_seed"),
}


def _explained(public: str, instead: str) -> Callable[..., Any]:
    """A replacement raising :class:`AcceleratorUnreachableError` naming ``instead``."""

    def make(original: Callable[..., Any], device: str) -> Callable[..., Any]:
        def unreachable(accelerator: str, error: RuntimeError) -> Any:
            import torch

            raise AcceleratorUnreachableError(
                f"torch.accelerator.{public}() needs torch's accelerator, which cannot be "
                f"{device} here: torch {torch.__version__} is built with {accelerator} and "
                f"refuses {device} beside it ('Cannot have both HPU and {accelerator}.'), so "
                f"torch.accelerator reports no accelerator. Call torch.{device}.{instead}() "
                f"instead (the torch.{device} function of the same purpose, for any other)."
            ) from error

        return _answering_conflict(original, unreachable)

    return make


def _cpu() -> Any:
    import torch

    return torch.device("cpu")


def _autocast_key(device_type: str) -> Any:
    """The dispatch key whose exclusion turns autocast on ``device_type`` off, or None."""
    import torch

    return getattr(torch._C.DispatchKey, f"Autocast{torch.device(device_type).type.upper()}", None)


def _autocast_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """``[device_type, *rest]`` of a call to ``torch.is/set_autocast_enabled``, whose
    deprecated forms leave the device out (CUDA then)."""
    rest = [value for key, value in kwargs.items() if key != "device_type"]
    if "device_type" in kwargs:
        return [kwargs["device_type"], *args, *rest]
    if args and isinstance(args[0], str):
        return [*args, *rest]
    return ["cuda", *args, *rest]


# Torch's C++ autocast state asks for the accelerator for every device type (the
# CPU's too), so torch.autocast(...) and torch.compile's guards raise. The state
# is the thread's excluded Autocast<Device> dispatch keys: these read and set
# them as at::autocast::is_autocast_enabled and set_autocast_enabled do.
def _is_autocast_enabled(original: Callable[..., Any], device: str) -> Any:
    @functools.wraps(original)
    def is_autocast_enabled(*args: Any, **kwargs: Any) -> bool:
        try:
            return bool(original(*args, **kwargs))
        except RuntimeError as error:
            if conflicting_accelerator(error) is None:
                raise
            key = _autocast_key(_autocast_arguments(args, kwargs)[0])
            if key is None:
                raise
            import torch

            return not torch._C._dispatch_tls_is_dispatch_key_excluded(key)

    return is_autocast_enabled


def _set_autocast_enabled(original: Callable[..., Any], device: str) -> Any:
    @functools.wraps(original)
    def set_autocast_enabled(*args: Any, **kwargs: Any) -> None:
        try:
            original(*args, **kwargs)
        except RuntimeError as error:
            if conflicting_accelerator(error) is None:
                raise
            device_type, enabled = _autocast_arguments(args, kwargs)
            key = _autocast_key(device_type)
            if key is None:
                raise
            import torch

            torch._C._dispatch_tls_set_dispatch_key_excluded(key, not enabled)

    return set_autocast_enabled


def _on_hpu_by_default(original: Callable[..., Any], device: str) -> Callable[..., Any]:
    """``Tensor.pin_memory()``/``is_pinned()`` without a device: for hpu, whose pinned
    memory torch cannot choose by itself here."""

    @functools.wraps(original)
    def replacement(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except RuntimeError as error:
            if conflicting_accelerator(error) is None or args or kwargs:
                raise
        with warnings.catch_warnings():
            # Torch deprecates the device argument: the accelerator is meant to decide.
            warnings.filterwarnings("ignore", r"The argument 'device' of Tensor\.")
            return original(self, device)

    return replacement


HPU_REPLACED: tuple[Replaced, ...] = (
    Replaced(
        "torch._C",
        "_accelerator_getAccelerator",
        "torch.accelerator.current_accelerator, is_available, device_count, "
        "torch.get_device_module(), torch.random.fork_rng and DataLoader(pin_memory=True) "
        "ask it; it answers None (no accelerator), as on a torch built without one, and warns "
        "once.",
        _no_accelerator(lambda: None),
    ),
    Replaced(
        "torch._C",
        "_get_accelerator",
        "torch.distributed and FSDP ask it for the default device; it answers the CPU, as "
        "on a torch whose accelerator is unavailable.",
        _no_accelerator(_cpu),
    ),
    Replaced(
        "torch._C",
        "_accelerator_isAllocatorInitialized",
        "torch.accelerator's memory statistics and empty_cache ask it first; False gives "
        "their no-accelerator answers (empty statistics, 0 bytes, no-op), as torch.cuda "
        "gives without a GPU.",
        _no_accelerator(lambda: False),
    ),
    *(
        Replaced(
            "torch._C",
            f"_accelerator_{key}",
            f"torch.accelerator.{public}() needs the accelerator: it raises "
            f"AcceleratorUnreachableError naming torch.hpu.{instead}().",
            _explained(public, instead),
        )
        for key, (public, instead) in _INSTEAD.items()
    ),
    Replaced(
        "torch",
        "is_autocast_enabled",
        "torch.autocast(...) asks it on entry, torch.compile for its guards: for every "
        "device type, the CPU's too, torch raises; it reads the Autocast<Device> key of the "
        "thread's excluded dispatch keys, as at::autocast::is_autocast_enabled does.",
        _is_autocast_enabled,
    ),
    Replaced(
        "torch",
        "set_autocast_enabled",
        "torch.autocast(...) calls it on entry and exit; it sets the Autocast<Device> key, "
        "as at::autocast::set_autocast_enabled does.",
        _set_autocast_enabled,
    ),
    Replaced(
        "torch.Tensor",
        "pin_memory",
        "pin_memory() pins for the accelerator; it pins for hpu, the device there is.",
        _on_hpu_by_default,
    ),
    Replaced(
        "torch.Tensor",
        "is_pinned",
        "is_pinned() asks the accelerator's host allocator; it asks hpu's.",
        _on_hpu_by_default,
    ),
)


def _owner(torch: types.ModuleType, owner: str) -> Any:
    return {"torch._C": torch._C, "torch": torch, "torch.Tensor": torch.Tensor}[owner]


def hpu_conflict(torch: types.ModuleType) -> str | None:
    """The accelerator torch refuses hpu beside in this process, or None."""
    try:
        torch._C._accelerator_getAccelerator()
    except RuntimeError as error:
        return conflicting_accelerator(error)
    return None


@functools.cache
def answer_device_generic_calls(torch: types.ModuleType, name: str) -> str | None:
    """Called once the HPU hooks of the backend of device ``name`` are registered:
    when torch then refuses it as the accelerator (no PrivateUse1 backend was
    activated before it), installs ``HPU_REPLACED`` and records the limit as the
    backend's note, which ``torchplug doctor`` prints. Returns the note, or None
    when torch accepts the device or another backend leads."""
    accelerator = hpu_conflict(torch)
    if accelerator is None:
        return None
    for replaced in HPU_REPLACED:
        owner = _owner(torch, replaced.owner)
        original = getattr(owner, replaced.name, None)
        if original is None:
            log.debug("torchplug: %s is missing; not replaced", replaced.symbol)
            continue
        setattr(owner, replaced.name, replaced.make(original, name))
    note = limitation(accelerator)
    with records.lock:
        status = records.by_device.get(name)
        if status is not None and status.state is BackendState.ACTIVE and not status.reason:
            status.reason = note
    return note
