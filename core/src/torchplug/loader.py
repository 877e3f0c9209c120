"""The entry-point adapter: activates backends safely during ``import torch``.

Upstream calls every ``torch.backends`` entry point inside ``import torch`` and
aborts the import on the first exception. Everything here is built so that a
torchplug backend never does that: activation is idempotent and re-entrant,
failures are recorded and raised on first use of the device, PrivateUse1 is
given to exactly one backend, and nothing mutates the environment.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
from importlib import metadata

from torchplug import settings
from torchplug.backend import Backend, BackendState, BackendStatus

log = logging.getLogger("torchplug")

PRIVATEUSE1_GROUP = "torchplug.privateuse1"
_UNCLAIMED_PRIVATEUSE1 = "privateuseone"

_lock = threading.RLock()
_statuses: dict[str, BackendStatus] = {}


class BackendLoadError(RuntimeError):
    """A torchplug backend could not be activated; raised on first use of its device."""


def statuses() -> dict[str, BackendStatus]:
    """The outcome of every activation attempted in this process, by device name."""
    with _lock:
        return dict(_statuses)


def activate(backend: Backend) -> BackendStatus:
    # Importing torch may itself run the torch.backends entry points, which
    # re-enter here for this very backend; the inner call does the work and
    # this one then finds its result.
    import torch  # noqa: F401

    from torchplug import serialization

    # Even a disabled or losing backend's device may be named by a checkpoint.
    serialization.install()
    with _lock:
        status = _statuses.get(backend.name)
        if status is None:
            started = time.perf_counter()
            status = _activate(backend)
            status.load_ms = (time.perf_counter() - started) * 1e3
            _statuses[backend.name] = status
            _report(status)
    if status.state is BackendState.FAILED and settings.current().strict:
        raise BackendLoadError(
            f"torchplug backend '{backend.name}' failed to load ({settings.STRICT}=1): {status.reason}"
        ) from status.error
    return status


def _report(status: BackendStatus) -> None:
    name = status.backend.name
    if status.state is BackendState.FAILED:
        log.warning(
            "torchplug backend '%s' failed to load; torch.%s is unavailable: %s",
            name,
            name,
            status.reason,
            exc_info=status.error,
        )
    elif status.state is BackendState.LOST_PRIVATEUSE1:
        log.info("torchplug backend '%s' is inactive: %s", name, status.reason)
    elif status.state is BackendState.DISABLED:
        log.debug("torchplug backend '%s' is disabled: %s", name, status.reason)


def _activate(backend: Backend) -> BackendStatus:
    config = settings.current()
    if backend.name in config.disabled:
        return BackendStatus(
            backend,
            BackendState.DISABLED,
            f"disabled by {settings.DISABLE}={','.join(sorted(config.disabled))}",
        )
    if backend.dispatch_key == "privateuse1":
        owner, why = privateuse1_owner(backend.name, config)
        if owner != backend.name:
            return BackendStatus(backend, BackendState.LOST_PRIVATEUSE1, why)
    status = BackendStatus(backend, BackendState.ACTIVE)
    try:
        _register(backend, status, config)
    except Exception as error:
        status.state = BackendState.FAILED
        status.error = error
        status.reason = f"{type(error).__name__}: {error}"
    return status


def privateuse1_candidates() -> list[str]:
    """Installed torchplug backends that want PrivateUse1, from package metadata."""
    return sorted({ep.name for ep in metadata.entry_points(group=PRIVATEUSE1_GROUP)})


def privateuse1_owner(name: str, config: settings.Settings) -> tuple[str, str]:
    """Which backend gets PrivateUse1 in this process, and why (for the losers)."""
    import torch

    claimed = torch._C._get_privateuse1_backend_name()
    if claimed not in (_UNCLAIMED_PRIVATEUSE1, name) and claimed not in _statuses:
        return claimed, (
            f"PrivateUse1 is already taken by '{claimed}' (registered before torchplug chose); "
            f"only one PrivateUse1 backend can be active per process. Uninstall or disable "
            f"'{claimed}' to use '{name}'."
        )
    candidates = sorted((set(privateuse1_candidates()) | {name}) - config.disabled)
    if config.privateuse1 is not None:
        if config.privateuse1 in candidates:
            chosen = config.privateuse1
            return chosen, (
                f"PrivateUse1 belongs to '{chosen}' ({settings.PRIVATEUSE1}={chosen}); "
                f"set {settings.PRIVATEUSE1}={name} to use '{name}' instead."
            )
        log.warning(
            "%s=%s names no installed PrivateUse1 backend (installed: %s); "
            "falling back to the default choice.",
            settings.PRIVATEUSE1,
            config.privateuse1,
            ", ".join(candidates),
        )
    chosen = candidates[0]
    return chosen, (
        f"PrivateUse1 belongs to '{chosen}', the first in name order of the installed "
        f"PrivateUse1 backends ({', '.join(candidates)}); only one can be active per process. "
        f"Set {settings.PRIVATEUSE1}={name} to use '{name}' instead."
    )


def check_torch_version(package: str = "torchplug", built_for: str | None = None) -> None:
    """Refuses to load a native build into a torch it was not compiled for.

    ``built_for`` is the torch version the package's extension was built
    against (its ``_build_info.TORCH_VERSION``, which CMake's
    ``torchplug_install_build_info`` writes); by default, the core's own.
    """
    import torch

    if built_for is None:
        from torchplug import _build_info

        built_for = _build_info.TORCH_VERSION
    running = torch.__version__.split("+")[0]
    if running != built_for:
        raise BackendLoadError(
            f"{package} was built for torch {built_for} but torch {running} is "
            f"running; install the {package} release built for torch {running}, or "
            f"`pip install torch=={built_for}`."
        )


def _register(backend: Backend, status: BackendStatus, config: settings.Settings) -> None:
    import torch

    from torchplug import device_module

    name = backend.name
    if backend.dispatch_key == "privateuse1":
        # Renaming first lets "foo" parse as a device even if a later step
        # fails, so first use reaches torch.foo and raises the recorded cause.
        torch.utils.rename_privateuse1_backend(name)
    module = device_module.build(backend, status)
    if getattr(torch, name, None) is not module:
        torch._register_device_module(name, module)
    check_torch_version()
    from torchplug import _C

    _C.configure(name, settings.device_count(name), settings.device_memory(name))
    if config.strict_memory:
        _C.set_strict_mode(True)
    _C.register_backend(backend.dispatch_key, name)
    _yield_to_autograd_threads_at_exit()
    if backend.dispatch_key == "privateuse1" and not hasattr(torch.Tensor, f"is_{name}"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_storage=True
        )
    elif backend.dispatch_key == "hpu":
        from torchplug import seeding

        device_module.add_tensor_methods(name)
        seeding.seed_with_torch(name)
    if backend.setup is not None:
        backend.setup(module)
    from torchplug import distributed, ipc

    distributed.register(name)
    ipc.share_between_processes(name)


# Seconds the interpreter hands the GIL to other threads before finalizing.
AUTOGRAD_EXIT_GRACE = 0.01


@functools.cache
def _yield_to_autograd_threads_at_exit() -> None:
    """Backward passes on a device run on autograd's device threads. Torch
    stashes a Python object in a finished pass's thread-local state, and the
    device thread may drop the last reference to it just after ``backward()``
    returns: that needs the GIL. If the interpreter is finalizing by then, the
    thread is ended inside a C++ destructor and the process aborts
    ("terminate called without an active exception"), which a script that
    exits right after training hit about one run in two. Releasing the GIL
    briefly at exit, before finalization, lets those threads finish."""
    atexit.register(time.sleep, AUTOGRAD_EXIT_GRACE)
