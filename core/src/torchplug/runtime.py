"""Process-wide controls of the simulated accelerator runtime.

These are for tests and debugging; backends and users normally steer the
runtime with environment variables (see the docs' device page).
"""

from __future__ import annotations


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

    parsed = torch.device(device)
    index = (
        parsed.index if parsed.index is not None else getattr(torch, parsed.type).current_device()
    )
    _C.inject_allocation_failures(parsed.type, index, int(count))
