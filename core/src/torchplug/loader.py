"""The entry-point adapter: activates backends safely during ``import torch``.

Upstream calls every ``torch.backends`` entry point inside ``import torch`` and
aborts the import on the first exception. Everything here is built so that a
torchplug backend never does that: a plugin's modules are imported under a
guard (:data:`plugin`, :func:`import_plugin`), activation is idempotent and
re-entrant, failures are recorded and raised on first use of the device,
PrivateUse1 goes to exactly one backend by a documented rule, and nothing
mutates the environment.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import logging
import sys
import threading
import time
import types
from importlib import metadata
from typing import Any

from torchplug import backend as _backend
from torchplug import serialization, settings
from torchplug.backend import PRIVATEUSE1_GROUP, Backend, BackendState, BackendStatus
from torchplug.errors import BackendLoadError, DeviceUnavailableError, explain

log = logging.getLogger("torchplug")

_UNCLAIMED_PRIVATEUSE1 = "privateuseone"

_lock = threading.RLock()
# By device name: the backend that holds the name (or failed, lost, was disabled).
_statuses: dict[str, BackendStatus] = {}
# Backends whose device name another distribution already holds.
_shadowed: list[BackendStatus] = []
# By distribution (or module when unknown): plugin modules that raised on import.
_import_failures: dict[str, BackendStatus] = {}
_privateuse1_holder: BackendStatus | None = None
_arbitrating = False
_warned_unknown_choice = False


def statuses() -> dict[str, BackendStatus]:
    """The outcome of every activation attempted in this process, by device name."""
    with _lock:
        return dict(_statuses)


def shadowed() -> list[BackendStatus]:
    """Backends that lost their device name to another distribution providing it."""
    with _lock:
        return list(_shadowed)


def import_failures() -> dict[str, BackendStatus]:
    """Plugin modules that raised when their entry point imported them, by distribution."""
    with _lock:
        return dict(_import_failures)


def activate(backend: Backend) -> BackendStatus:
    # Declared before importing torch: that import may run the torch.backends
    # entry points, whose PrivateUse1 arbitration must see this backend.
    with _lock:
        status = _declare(backend)
    import torch

    # Even a disabled or losing backend's device may be named by a checkpoint.
    serialization.install(statuses)
    with _lock:
        _explain_missing_device_modules(torch)
        if status.state is BackendState.PENDING and not _arbitrating:
            _settle(status)
        if backend.dispatch_key == "hpu" and status.state is BackendState.DISABLED:
            _stand_in_hpu_module(torch, status)
    if status.state is BackendState.FAILED and settings.current().strict:
        raise _strict_error(status)
    return status


# Backend.autoload() activates through this module.
_backend._activate = activate


def _strict_error(status: BackendStatus) -> BackendLoadError:
    error = BackendLoadError(
        f"torchplug backend '{status.backend.name}' failed to load ({settings.STRICT}=1): "
        f"{status.reason}"
    )
    error.__cause__ = status.error
    return error


def _declare(backend: Backend) -> BackendStatus:
    config = settings.current()
    name = backend.name
    held = _statuses.get(name)
    if held is not None and held.backend == backend:
        return held
    if config.disables(name, backend.distribution):
        status = BackendStatus(
            backend,
            BackendState.DISABLED,
            f"disabled by {settings.DISABLE}={','.join(sorted(config.disabled))}",
        )
        if held is None:
            _statuses[name] = status
            _report(status)
        return status
    if held is not None and held.state is not BackendState.DISABLED:
        return _shadow(backend, held)
    status = BackendStatus(backend, BackendState.PENDING)
    _statuses[name] = status
    return status


def _shadow(backend: Backend, held: BackendStatus) -> BackendStatus:
    known = next((s for s in _shadowed if s.backend == backend), None)
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
    _shadowed.append(status)
    _report(status)
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
    elif status.state is BackendState.SHADOWED:
        log.warning("torchplug backend '%s' is inactive: %s.", name, status.reason)
    elif status.state is BackendState.LOST_PRIVATEUSE1:
        # A choice the user made explicitly needs no warning.
        holder = _privateuse1_holder
        chosen = holder is not None and holder.backend.name == settings.current().privateuse1
        level = logging.INFO if chosen else logging.WARNING
        log.log(level, "torchplug backend '%s' is inactive: %s", name, status.reason)
    elif status.state is BackendState.DISABLED:
        log.debug("torchplug backend '%s' is disabled: %s", name, status.reason)


def _settle(status: BackendStatus) -> None:
    if status.backend.dispatch_key == "privateuse1":
        _settle_privateuse1(status)
    else:
        _register_timed(status)


def _register_timed(status: BackendStatus) -> None:
    started = time.perf_counter()
    status.state = BackendState.ACTIVE
    try:
        _register(status.backend, status, settings.current())
    except Exception as error:
        status.state = BackendState.FAILED
        status.error = error
        status.reason = _describe(error)
        if _kept_privateuse1_after_failing(status.backend):
            status.reason += (
                f"; '{status.backend.name}' had already taken PrivateUse1, which torch cannot "
                f"give back within a process, so no other PrivateUse1 backend can be active. "
                f"Set {settings.DISABLE}={status.backend.name} to let another one take it"
            )
    status.load_ms = (time.perf_counter() - started) * 1e3
    _report(status)


def _describe(error: BaseException) -> str:
    """An exception as a reason: its type and message, never an empty message."""
    message = str(error).strip()
    return (
        f"{type(error).__name__}: {message}" if message else f"{type(error).__name__} (no message)"
    )


def _kept_privateuse1_after_failing(backend: Backend) -> bool:
    """Whether ``backend`` failed after renaming PrivateUse1 (in ``Backend(setup=)`` or a
    later step) without the user having chosen it: torch accepts one name per process,
    so the key stays with the failed backend."""
    import torch

    return (
        backend.dispatch_key == "privateuse1"
        and settings.current().privateuse1 != backend.name
        and torch._C._get_privateuse1_backend_name() == backend.name
    )


def _settle_privateuse1(status: BackendStatus) -> None:
    import torch

    global _privateuse1_holder
    if _privateuse1_holder is not None:
        _lose(status, _privateuse1_holder, "it was activated first")
        return
    claimed = torch._C._get_privateuse1_backend_name()
    if claimed != _UNCLAIMED_PRIVATEUSE1:
        name = status.backend.name
        status.state = BackendState.LOST_PRIVATEUSE1
        status.reason = (
            f"PrivateUse1 is already taken by '{claimed}' (registered before torchplug chose); "
            f"only one PrivateUse1 backend can be active per process. Uninstall or disable "
            f"'{claimed}' to use '{name}'."
        )
        _report(status)
        return
    config = settings.current()
    ranked = _rank_privateuse1(_privateuse1_candidates(config), config)
    for candidate in ranked:
        _register_timed(candidate)
        if candidate.state is BackendState.ACTIVE or candidate.backend.name == config.privateuse1:
            _privateuse1_holder = candidate
            break
        # Failed before taking the key: the next in rank order may take it.
        if torch._C._get_privateuse1_backend_name() != _UNCLAIMED_PRIVATEUSE1:
            _privateuse1_holder = candidate
            break
    holder = _privateuse1_holder
    for candidate in ranked:
        if candidate.state is BackendState.PENDING and holder is not None:
            _lose(candidate, holder, _why_first(holder, candidate, ranked, config))
    # A candidate that failed here was tried on behalf of another backend's
    # activation, so its own activation never reports it.
    failed = next((c for c in ranked if c.state is BackendState.FAILED), None)
    if failed is not None and config.strict:
        raise _strict_error(failed)


def _privateuse1_candidates(config: settings.Settings) -> list[BackendStatus]:
    """The PrivateUse1 backends to choose among: with autoload on, every installed
    one (imported here so that each declares itself); with autoload off, those
    imported explicitly."""
    global _arbitrating
    if config.autoload:
        _arbitrating = True
        try:
            for entry_point in metadata.entry_points(group=PRIVATEUSE1_GROUP):
                held = _statuses.get(entry_point.name)
                undeclared = held is None or held.state is BackendState.DISABLED
                if undeclared and not config.disables(
                    entry_point.name, _distribution_name(entry_point)
                ):
                    import_plugin(entry_point.value, device=entry_point.name)
        finally:
            _arbitrating = False
    return [
        s
        for s in _statuses.values()
        if s.state is BackendState.PENDING and s.backend.dispatch_key == "privateuse1"
    ]


def _rank_privateuse1(
    candidates: list[BackendStatus], config: settings.Settings
) -> list[BackendStatus]:
    global _warned_unknown_choice
    names = {c.backend.name for c in candidates}
    chosen = config.privateuse1
    if chosen is not None and chosen not in names and not _warned_unknown_choice:
        _warned_unknown_choice = True
        log.warning(
            "%s=%s names no installed PrivateUse1 backend (installed: %s); "
            "falling back to the default choice.",
            settings.PRIVATEUSE1,
            chosen,
            ", ".join(sorted(names | set(privateuse1_candidates()))) or "none",
        )
    return sorted(
        candidates,
        key=lambda c: (c.backend.name != chosen, -c.backend.priority, c.backend.name),
    )


def _why_first(
    holder: BackendStatus,
    loser: BackendStatus,
    ranked: list[BackendStatus],
    config: settings.Settings,
) -> str:
    winner = holder.backend
    if config.privateuse1 == winner.name:
        return f"{settings.PRIVATEUSE1}={winner.name}"
    if winner.priority != loser.backend.priority:
        return (
            f"its priority {winner.priority} is higher than {loser.backend.priority}, "
            f"the priority of '{loser.backend.name}'"
        )
    failed = [c.backend.name for c in ranked if c.state is BackendState.FAILED and c is not holder]
    order = ", ".join(c.backend.name for c in ranked)
    note = f"; {', '.join(repr(n) for n in failed)} failed to load" if failed else ""
    return f"the first in name order of the installed PrivateUse1 backends ({order}){note}"


def _lose(status: BackendStatus, holder: BackendStatus, why: str) -> None:
    name = status.backend.name
    winner = holder.backend.name
    failed = ""
    remedy = f"{settings.PRIVATEUSE1}={name}"
    if not holder.active:
        cause = _describe(holder.error) if holder.error is not None else holder.reason
        when = ""
        if _kept_privateuse1_after_failing(holder.backend):
            when = " after taking the key (torch cannot give it back within a process)"
            remedy += f" or {settings.DISABLE}={winner}"
        failed = f", which failed{when}: {cause.rstrip('.')}"
    status.state = BackendState.LOST_PRIVATEUSE1
    if settings.current().privateuse1 == winner:
        status.reason = (
            f"PrivateUse1 belongs to '{winner}' ({why}{failed}); "
            f"set {remedy} to use '{name}' instead."
        )
    else:
        status.reason = (
            f"PrivateUse1 belongs to '{winner}' ({why}{failed}); only one PrivateUse1 backend "
            f"can be active per process. Set {remedy} to use '{name}' instead."
        )
    _report(status)


def privateuse1_candidates() -> list[str]:
    """Installed torchplug backends that want PrivateUse1, from package metadata."""
    return sorted({ep.name for ep in metadata.entry_points(group=PRIVATEUSE1_GROUP)})


def import_plugin(module: str, device: str | None = None) -> None:
    """Imports a plugin's module for its ``torch.backends`` entry point, never
    breaking ``import torch``: an exception is logged once with its cause,
    recorded for ``torchplug doctor`` (and for ``device``, when named) and
    raised only under ``TORCHPLUG_STRICT=1``."""
    try:
        importlib.import_module(module)
    except Exception as error:
        _record_import_failure(module, device, error)


def _record_import_failure(module: str, device: str | None, error: Exception) -> None:
    distribution = _distribution_of_module(module)
    if device is None:
        device = next(
            (
                ep.name
                for ep in metadata.entry_points(group=PRIVATEUSE1_GROUP)
                if ep.value == module
            ),
            None,
        )
    reason = f"importing {module} raised {_describe(error)}"
    with _lock:
        if (distribution or module) in _import_failures:
            return  # the arbitration and torch's entry point both import it
        key = "hpu" if device == "hpu" else "privateuse1"
        backend = Backend(name=device or "unknown", dispatch_key=key, distribution=distribution)
        status = BackendStatus(backend, BackendState.FAILED, reason, error=error)
        _import_failures[distribution or module] = status
        if device is not None and device not in _statuses:
            _statuses[device] = status
            if device == "hpu" and "torch" in sys.modules:
                _stand_in_hpu_module(sys.modules["torch"], status)
        log.warning(
            "torchplug plugin %s (%s) failed to import; its device is unavailable and "
            "`import torch` goes on without it: %s",
            distribution or module,
            module,
            reason,
            exc_info=error,
        )
    if settings.current().strict:
        raise BackendLoadError(
            f"torchplug plugin {distribution or module} failed to import ({settings.STRICT}=1): {reason}"
        ) from error


def _distribution_of_module(module: str) -> str | None:
    for group in ("torch.backends", PRIVATEUSE1_GROUP):
        for entry_point in metadata.entry_points(group=group):
            if entry_point.value in (module, f"{__name__}:plugin.{module}"):
                return _distribution_name(entry_point)
    return None


def _distribution_name(entry_point: metadata.EntryPoint) -> str | None:
    return entry_point.dist.name if entry_point.dist is not None else None


class _PluginImporter:
    """A ``torch.backends`` entry point that imports a plugin under torchplug's guard.

    Upstream loads an entry point and calls it with no arguments, so the
    module to import is spelled as the attribute path:
    ``torch_foo = "torchplug.loader:plugin.torch_foo"`` imports ``torch_foo``
    and ``"torchplug.loader:plugin.vendor.torch"`` imports ``vendor.torch``.
    Upstream itself then only imports ``torchplug.loader``, which cannot fail
    because of the plugin.
    """

    def __init__(self, module: str = "") -> None:
        self._module = module

    def __getattr__(self, part: str) -> _PluginImporter:
        if part.startswith("_"):
            raise AttributeError(part)
        return _PluginImporter(f"{self._module}.{part}" if self._module else part)

    def __call__(self) -> None:
        import_plugin(self._module)

    def __repr__(self) -> str:
        return f"<torchplug entry point importing {self._module or '?'}>"


plugin = _PluginImporter()


@functools.cache
def _explain_missing_device_modules(torch: types.ModuleType) -> None:
    """Makes ``torch.<name>`` of an inactive backend raise why, instead of
    "module 'torch' has no attribute". Torch looks its missing attributes up
    in the module's ``__getattr__``; this one answers for torchplug's device
    names first and defers to torch's for everything else."""
    torch_getattr = torch.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        status = _statuses.get(name)
        if status is not None and status.state not in (BackendState.ACTIVE, BackendState.PENDING):
            raise DeviceUnavailableError(f"torch.{name} is unavailable. {explain(status)}")
        if torch_getattr is None:
            raise AttributeError(f"module 'torch' has no attribute '{name}'")
        return torch_getattr(name)

    torch.__getattr__ = __getattr__


def _stand_in_hpu_module(torch: types.ModuleType, status: BackendStatus) -> None:
    """Tensor creation on ``hpu`` imports ``torch.hpu`` to initialise the device;
    when the hpu backend is not active, a stand-in there raises why."""
    if "torch.hpu" in sys.modules or "hpu" in torch.__dict__:
        return
    module = types.ModuleType("torch.hpu", "Stand-in for the inactive 'hpu' backend.")

    def _lazy_init() -> None:
        raise BackendLoadError(explain(status)) from status.error

    module._lazy_init = _lazy_init  # type: ignore[attr-defined]
    module.is_available = lambda: False  # type: ignore[attr-defined]
    module.device_count = lambda: 0  # type: ignore[attr-defined]
    sys.modules["torch.hpu"] = module


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
    # Torch keeps its C++ ABI within a minor release (2.15.0 and 2.15.1), not across.
    built_minor = ".".join(built_for.split(".")[:2])
    if ".".join(running.split(".")[:2]) != built_minor:
        raise BackendLoadError(
            f"{package} was built for torch {built_for} but torch {running} is "
            f"running; install the {package} release built for torch {running}, or "
            f"`pip install 'torch=={built_minor}.*'`."
        )


def check_build(package: str, build_info: types.ModuleType) -> None:
    """Refuses to load a plugin's native build into a torch or a torchplug core
    it cannot run with, before anything fails with an undefined symbol.

    ``build_info`` is the plugin's ``_build_info`` module, which CMake's
    ``torchplug_install_build_info`` writes: the torch it was built for
    (same minor release required) and the core's kernel API version it was
    compiled against (the running core must offer at least that one).
    """
    from torchplug import _build_info as core

    # The installed distribution's version: the torchplug package imports this
    # module, so this module does not import the package.
    version = metadata.version("torchplug")
    check_torch_version(package, build_info.TORCH_VERSION)
    # Builds made before torchplug 0.1.0's wheels recorded no kernel API version.
    needed = getattr(build_info, "KERNEL_API_VERSION", 0)
    offered = getattr(core, "KERNEL_API_VERSION", 0)
    if needed > offered:
        raise BackendLoadError(
            f"{package} was built against torchplug {build_info.TORCHPLUG_VERSION} (kernel API "
            f"{needed}) but torchplug {version} (kernel API {offered}) is "
            f"installed; `pip install "
            f"'torchplug>={build_info.TORCHPLUG_VERSION}'`, or install the {package} release "
            f"built for torchplug {version}."
        )


def _register(backend: Backend, status: BackendStatus, config: settings.Settings) -> None:
    import torch

    from torchplug import device_module

    name = backend.name
    # The HPU key is never contested, and a PrivateUse1 backend the user named
    # keeps the key: their device names reach the recorded cause even when
    # preparing failed. Any other backend that fails to prepare leaves the
    # key to the next one.
    keeps_device = backend.dispatch_key == "hpu" or config.privateuse1 == name
    try:
        _prepare(backend)
    except Exception:
        if keeps_device:
            _take_device(backend, status)
        raise
    module = _take_device(backend, status)
    from torchplug import _C

    _C.configure(name, settings.device_count(name), settings.device_memory(name))
    if config.strict_memory:
        _C.set_strict_mode(True)
    _C.register_backend(backend.dispatch_key, name)
    _yield_to_autograd_threads_at_exit()
    _run_backward_on_calling_thread()
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
    from torchplug import distributed, inductor, ipc

    distributed.register(name)
    ipc.share_between_processes(name)
    inductor.enable(name)
    if config.sanitizer:
        # Imported only here: the sanitizer costs nothing unless asked for.
        from torchplug import sanitizer

        sanitizer.enable()


def _prepare(backend: Backend) -> None:
    """What can fail before the backend takes its device, and so leaves it to another."""
    check_torch_version()
    from torchplug import _C  # noqa: F401 - loading the native core is what may fail

    if backend.prepare is not None:
        backend.prepare()


def _take_device(backend: Backend, status: BackendStatus) -> types.ModuleType:
    import torch

    from torchplug import device_module

    name = backend.name
    if backend.dispatch_key == "privateuse1":
        # Renaming first lets "foo" parse as a device even if a later step
        # fails, so first use reaches torch.foo and raises the recorded cause.
        torch.utils.rename_privateuse1_backend(name)
    module = device_module.build(backend, status)
    if torch.__dict__.get(name) is not module:
        torch._register_device_module(name, module)
    return module


@functools.cache
def _run_backward_on_calling_thread() -> None:
    """A simulated device runs its kernels on the host thread that launches
    them, so autograd's per-device worker thread overlaps nothing: each
    backward pass only pays two thread hand-offs (about 100 microseconds on a
    small model, more than the pass itself). Backward passes started by the
    thread that activated the backends (the one that ran ``import torch``)
    therefore run on that thread, as the CPU's do: upstream's
    ``torch.autograd.set_multithreading_enabled(False)``, which also covers
    CUDA's passes in a process that has both. Other threads keep autograd's
    default; ``torch.autograd.set_multithreading_enabled(True)`` restores it."""
    import torch

    torch.autograd.set_multithreading_enabled(False)


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
