"""Process-wide controls of the simulated accelerator runtime.

These are for tests and debugging; backends and users normally steer the
runtime with environment variables (see the docs' device page).
"""

from __future__ import annotations

from typing import Any, NamedTuple


def set_strict_memory(enabled: bool) -> None:
    """Page-protects device memory allocated from now on outside kernels and copies.

    Enable it before creating device tensors (or set ``TORCHPLUG_STRICT_MEMORY=1``):
    memory allocated earlier stays host-readable. A host access to protected
    device memory terminates the process with a message naming the problem.
    """
    from torchplug import _C

    _C.set_strict_mode(bool(enabled))


def strict_memory() -> bool:
    from torchplug import _C

    return _C.strict_mode()


def inject_allocation_failures(device: str, count: int = 1) -> None:
    """Makes the next ``count`` allocations on ``device`` (e.g. ``"foo:0"``) fail as out of memory."""
    import torch

    from torchplug import _C

    _C.inject_allocation_failures(*_device_and_index(torch.device(device)), int(count))


def inject_kernel_failures(device: str, count: int = 1) -> None:
    """Makes the next ``count`` kernels launched on ``device`` fail while they run.

    With asynchronous execution (the default) the error surfaces at the next
    synchronizing call (``synchronize()``, ``item()``, ``.cpu()``), naming the
    kernel's operator, as a faulting kernel on real hardware does; with
    ``TORCHPLUG_LAUNCH_BLOCKING=1`` it is raised by the launching call.
    """
    import torch

    from torchplug import _C

    _C.inject_kernel_failures(*_device_and_index(torch.device(device)), int(count))


def launch_blocking() -> bool:
    """True when kernels run as they are launched (``TORCHPLUG_LAUNCH_BLOCKING=1``, strict memory)."""
    from torchplug import _C

    return _C.launch_blocking()


class HostSynchronizations(NamedTuple):
    """How often the host waited for a device type's work (see :func:`host_synchronizations`)."""

    #: The program read a result: ``item()``, ``.cpu()``, a blocking copy.
    requested: int
    #: An operator that runs on the host waited for the work queued before it.
    implicit: int


def host_synchronizations(device_type: str) -> HostSynchronizations:
    """The host's waits for devices of ``device_type`` since the process started
    or :func:`reset_host_synchronizations`.

    A training step that keeps the device busy waits only where its code reads a
    result (``loss.item()``): ``requested``. ``implicit`` counts the operators
    that run on the host (the CPU fallback, host kernels) and had to wait for
    the kernels queued before them; sync-debug mode
    (``torch.<device>.set_sync_debug_mode("warn")``) names each.
    """
    from torchplug import _C

    return HostSynchronizations(*_C.host_waits(device_type))


def reset_host_synchronizations(device_type: str) -> None:
    """Starts :func:`host_synchronizations` of ``device_type`` from zero."""
    from torchplug import _C

    _C.reset_host_waits(device_type)


def worker_scratch_bytes() -> int:
    """Host memory the stream workers keep cached for the CPU code of queued
    kernels, in bytes: buffers of 1 MiB or more that a kernel allocated and
    freed (oneDNN's reordered weights, a result on its way into device
    memory), kept mapped for the next step's kernels, up to 512 MiB.
    ``torch.<device>.empty_cache()`` frees them."""
    from torchplug import _C

    return _C.worker_scratch_bytes()


def _device_and_index(parsed: Any) -> tuple[str, int]:
    import torch

    index = (
        parsed.index if parsed.index is not None else getattr(torch, parsed.type).current_device()
    )
    return parsed.type, index


def configure_devices(
    backend: str, device_count: int | None = None, memory: int | str | None = None
) -> None:
    """Sets how many devices ``backend`` has and how much memory each, before first use.

    ``memory`` takes bytes or a size such as ``"16GiB"``. Once a device of the
    backend holds memory or a stream, its configuration is fixed and a
    different one raises. The environment variables ``TORCHPLUG_DEVICE_COUNT``
    and ``TORCHPLUG_DEVICE_MEMORY`` (or ``TORCHPLUG_<NAME>_...``) set the same
    at start-up.
    """
    from torchplug import _C, settings

    count = settings.device_count(backend) if device_count is None else int(device_count)
    if memory is None:
        capacity = settings.device_memory(backend)
    elif isinstance(memory, str):
        capacity = settings.parse_bytes(memory)
    else:
        capacity = int(memory)
    _C.configure(backend, count, capacity)
