"""Registering one backend with torch and the core, subsystem by subsystem.

The sequence a backend goes through once it may take its device: prepare
(what may still fail without taking the device), take the device name and
``torch.<name>``, configure the native core, then each torch subsystem
(tensor methods, seeding, distributed, IPC, torch.compile, the sanitizer)
and the plugin's own ``setup``.
"""

from __future__ import annotations

import atexit
import functools
import time
import types

from torchplug import cuda_coexistence, settings
from torchplug.activation import records, torch_patches
from torchplug.activation.build_checks import check_torch_version
from torchplug.backend import Backend, BackendState, BackendStatus
from torchplug.device_kind import kind_of


def register_timed(status: BackendStatus) -> None:
    """Registers ``status``'s backend, recording the outcome and how long it took."""
    started = time.perf_counter()
    status.state = BackendState.ACTIVE
    try:
        register(status.backend, status, settings.current())
    except Exception as error:
        status.state = BackendState.FAILED
        status.error = error
        status.reason = records.describe(error)
        if kept_privateuse1_after_failing(status.backend):
            status.reason += (
                f"; '{status.backend.name}' had already taken PrivateUse1, which torch cannot "
                f"give back within a process, so no other PrivateUse1 backend can be active. "
                f"Set {settings.DISABLE}={status.backend.name} to let another one take it"
            )
    status.load_ms = (time.perf_counter() - started) * 1e3
    records.report(status)


def kept_privateuse1_after_failing(backend: Backend) -> bool:
    """Whether ``backend`` failed after renaming PrivateUse1 (in ``Backend(setup=)`` or a
    later step) without the user having chosen it: torch accepts one name per
    process, so the key stays with the failed backend."""
    import torch

    return (
        kind_of(backend.dispatch_key).renamed_to_backend
        and settings.current().privateuse1 != backend.name
        and torch._C._get_privateuse1_backend_name() == backend.name
    )


def register(backend: Backend, status: BackendStatus, config: settings.Settings) -> None:
    import torch

    from torchplug import device_module

    name = backend.name
    kind = kind_of(backend.dispatch_key)
    # A key no one competes for is never given back, and a PrivateUse1 backend
    # the user named keeps the key: their device names reach the recorded cause
    # even when preparing failed. Any other backend that fails to prepare
    # leaves the key to the next one.
    keeps_device = not kind.renamed_to_backend or config.privateuse1 == name
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
    if config.warn_fallback:
        device_module.warn_on_fallback()
    cuda_coexistence.warn_at_activation(name, backend.dispatch_key)
    _yield_to_autograd_threads_at_exit()
    _run_backward_on_calling_thread()
    if kind.torch_generates_methods:
        if not hasattr(torch.Tensor, f"is_{name}"):
            torch.utils.generate_methods_for_privateuse1_backend(
                for_tensor=True, for_module=True, for_storage=True
            )
    else:
        device_module.add_tensor_methods(name)
        # Now that the key's hooks are registered, torch may refuse the device
        # as its accelerator (hpu on a torch built with CUDA): device-generic
        # calls then answer for it instead of raising.
        torch_patches.answer_device_generic_calls(torch, name)
    if kind.seeded_by_torchplug:
        from torchplug import seeding

        seeding.seed_with_torch(name)
    if backend.setup is not None:
        backend.setup(module)
    from torchplug import distributed, inductor, ipc

    distributed.register(name)
    ipc.share_between_processes(name)
    inductor.enable(name)
    _watch_frameworks()
    if config.sanitizer:
        # Imported only here: the sanitizer costs nothing unless asked for.
        from torchplug import sanitizer

        sanitizer.enable()


# The module of each training framework that finds devices by name or by a
# fixed list, and the integration (torchplug.integrations.<name>) that adapts
# it right after it is first imported: import torch imports no integration.
FRAMEWORK_INTEGRATIONS = {
    "accelerate.accelerator": "accelerate",
    "transformers.training_args": "transformers",
    "transformers.utils.import_utils": "transformers_graphs",
    "transformers.testing_utils": "transformers_testing",
    "lightning.pytorch.trainer.connectors.accelerator_connector": "lightning",
    "pytorch_lightning.trainer.connectors.accelerator_connector": "lightning",
}


@functools.cache
def _watch_frameworks() -> None:
    from torchplug.inductor.hooks import after_import

    for framework, integration in FRAMEWORK_INTEGRATIONS.items():
        after_import(framework, functools.partial(_integrate, integration))


def _integrate(integration: str, framework: types.ModuleType) -> None:
    from torchplug import integrations

    integrations.install(integration, framework)


def _prepare(backend: Backend) -> None:
    """What can fail before the backend takes its device, and so leaves it to another."""
    check_torch_version()
    from torchplug import _C  # loading the native core may fail

    if backend.prepare is not None:
        backend.prepare()
    # Loading the driver, its version, initialising it and what the core needs
    # of it: a driver that fails leaves the device to another backend.
    _C.open_driver(backend.name, driver_path(backend), backend.driver_options or "")


def driver_path(backend: Backend) -> str:
    """The driver library ``backend`` runs on: its ``driver``, else the simulator."""
    if backend.driver is not None:
        return str(backend.driver)
    from torchplug import _C

    return _C.default_driver_path()


def _take_device(backend: Backend, status: BackendStatus) -> types.ModuleType:
    import torch

    from torchplug import device_module

    name = backend.name
    if kind_of(backend.dispatch_key).renamed_to_backend:
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
