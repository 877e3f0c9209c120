"""Activation: backends become usable during ``import torch``, safely.

A plugin's ``Backend.autoload()`` ends in :func:`activate`. It is idempotent
and re-entrant (torch's entry point, an explicit import, threads and child
processes all end in one registration); failures are recorded
(:mod:`~torchplug.activation.records`) and raised on first use of the device;
PrivateUse1 goes to exactly one backend (:mod:`~torchplug.activation.privateuse1`);
nothing mutates the environment. Plugin modules are imported under the guard
of :mod:`~torchplug.activation.entry_points`, and
:mod:`~torchplug.activation.registration` wires a backend into torch.
"""

from __future__ import annotations

from torchplug import backend as _backend
from torchplug import serialization, settings
from torchplug.activation import privateuse1, records
from torchplug.activation.registration import register_timed
from torchplug.activation.torch_patches import (
    explain_missing_device_modules,
    stand_in_device_module,
)
from torchplug.backend import Backend, BackendState, BackendStatus
from torchplug.device_kind import kind_of


def activate(backend: Backend) -> BackendStatus:
    """Activates ``backend`` once per process and returns its recorded outcome."""
    # Declared before importing torch: that import may run the torch.backends
    # entry points, whose PrivateUse1 arbitration must see this backend.
    with records.lock:
        status = _declare(backend)
    import torch

    # Even a disabled or losing backend's device may be named by a checkpoint.
    serialization.install(records.statuses)
    with records.lock:
        explain_missing_device_modules(torch)
        if status.state is BackendState.PENDING and not privateuse1.arbitrating():
            if kind_of(backend.dispatch_key).renamed_to_backend:
                privateuse1.settle(status)
            else:
                register_timed(status)
        if status.state is BackendState.DISABLED:
            stand_in_device_module(torch, status)
    if status.state is BackendState.FAILED and settings.current().strict:
        raise records.strict_error(status)
    return status


# Backend.autoload() activates through this package.
_backend._activate = activate


def _declare(backend: Backend) -> BackendStatus:
    config = settings.current()
    name = backend.name
    held = records.by_device.get(name)
    if held is not None and held.backend == backend:
        return held
    if config.disables(name, backend.distribution):
        status = BackendStatus(
            backend,
            BackendState.DISABLED,
            f"disabled by {settings.DISABLE}={','.join(sorted(config.disabled))}",
        )
        if held is None:
            records.by_device[name] = status
            records.report(status)
        return status
    if held is not None and held.state is not BackendState.DISABLED:
        return _shadow(backend, held)
    status = BackendStatus(backend, BackendState.PENDING)
    records.by_device[name] = status
    return status


def _shadow(backend: Backend, held: BackendStatus) -> BackendStatus:
    known = next((s for s in records.shadowed_backends if s.backend == backend), None)
    if known is not None:
        return known
    name = backend.name
    holder = held.backend.distribution or "another distribution"
    mine = backend.distribution or "another distribution"
    status = BackendStatus(
        backend,
        BackendState.SHADOWED,
        f"the '{name}' device is provided by both {holder} and {mine}; {holder} was activated "
        f"first and holds it, so {mine}'s '{name}' is inactive. Set {settings.DISABLE}={holder} "
        f"to use {mine}'s instead, or uninstall one of them",
    )
    records.shadowed_backends.append(status)
    records.report(status)
    return status
