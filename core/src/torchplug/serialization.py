"""Clear errors for checkpoints holding tensors of a device this process lacks.

``torch.load`` of a checkpoint saved from a device whose backend is not
installed (or not active here) fails upstream with "don't know how to restore
data location ... (tagged with npu:0)". torchplug puts a deserializer ahead of
the device ones that recognises that case and says which device is missing,
which package provides it (or why its installed backend is inactive) and how
to load the checkpoint anyway (``map_location="cpu"``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from importlib import metadata

from torchplug.backend import PRIVATEUSE1_GROUP, BackendStatus
from torchplug.device_kind import kind_of_device

# Ahead of every device deserializer torch registers (cpu is 10, cuda 20,
# privateuse1 23, hpu 24), so the missing-device case is caught before
# torch's own, vaguer, errors. Priorities must be unique: the registry sorts tuples.
_PRIORITY = 19

_lock = threading.Lock()
_installed = False
# Activation's record of every backend's outcome, by device name.
_statuses: Callable[[], Mapping[str, BackendStatus]] = dict


class MissingDeviceError(RuntimeError):
    """A checkpoint holds tensors of a device no active backend provides."""


def install(statuses: Callable[[], Mapping[str, BackendStatus]]) -> None:
    """Registers the missing-device check with ``torch.serialization``. Idempotent.

    ``statuses`` answers, by device name, how each backend's activation went
    (``torchplug.statuses``): it explains why a device is missing.
    """
    global _installed, _statuses
    with _lock:
        _statuses = statuses
        if _installed:
            return
        import torch.serialization

        torch.serialization.register_package(_PRIORITY, _never_tags, _check_device_present)
        _installed = True


def _never_tags(storage: object) -> None:
    del storage


def _check_device_present(storage: object, location: str) -> None:
    """Returns None (letting torch's deserializers run) unless ``location``'s device is missing."""
    del storage
    import torch

    device_type = location.split(":", 1)[0]
    module = getattr(torch, device_type, None)
    if module is not None and getattr(module, "is_available", lambda: True)():
        return None
    reason = _why_missing(device_type)
    if reason is None:
        return None  # a device torch knows and handles itself (e.g. cuda on a CPU box)
    raise MissingDeviceError(
        f"This checkpoint holds tensors saved on '{location}', but {reason} "
        "To load it anyway, map the tensors to a device you have: torch.load(..., map_location='cpu')."
    )


def _why_missing(device_type: str) -> str | None:
    status = _statuses().get(device_type)
    if status is not None and not status.active:
        package = status.backend.distribution or f"the '{device_type}' backend"
        reason = status.reason.rstrip(". ") or f"it is {status.state.value}"
        return f"the '{device_type}' device of {package} is not active in this process: {reason}."
    installed = _installed_privateuse1_distribution(device_type)
    if installed is not None:
        return (
            f"{installed} (which provides '{device_type}') is installed but did not load; "
            f"run `torchplug doctor` to see why."
        )
    # torch's own messages serve its built-in devices (cuda on a CPU box, ...);
    # an in-tree key a plugin provides (hpu) is built in only as a name.
    if _is_builtin_device_type(device_type) and not _provided_by_plugins(device_type):
        return None
    return (
        f"no installed backend provides the '{device_type}' device. Install the package that "
        f"provides it (a torchplug plugin such as torch_foo, or the vendor's PyTorch extension); "
        f"`torchplug doctor` lists the backends installed here."
    )


def _provided_by_plugins(device_type: str) -> bool:
    """Whether ``device_type`` is the fixed name of an in-tree key plugins provide."""
    return kind_of_device(device_type).fixed_name() == device_type


def _installed_privateuse1_distribution(device_type: str) -> str | None:
    for entry_point in metadata.entry_points(group=PRIVATEUSE1_GROUP):
        if entry_point.name == device_type:
            return entry_point.dist.name if entry_point.dist is not None else entry_point.value
    return None


def _is_builtin_device_type(device_type: str) -> bool:
    import torch

    try:
        torch.device(device_type)
    except RuntimeError:
        return False
    return True
