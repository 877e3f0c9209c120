"""The stream sanitizer: finds unsynchronized accesses to memory across streams.

Every operator on a torchplug device is seen through a dispatch mode and
checked against a model of the program's stream order: one vector clock per
stream and one for the host. An operator ticks the clock of the stream it is
launched on; event records, event waits and synchronizations (queued by the
core's C++ hooks in program order, see ``_C.take_stream_trace``) carry
clocks from one stream to another or to the host. An access conflicts with
an earlier one on the same memory when the earlier access is not ordered
before it (its tick is not in the accessing clock) and at least one of them
writes. Conflicts raise :class:`StreamRaceError` from the operator that makes
the second access, before it runs.

The check follows the program's order, not the device's timing, so it finds
a missing synchronization even when the device happened to be fast enough.
``TORCHPLUG_SANITIZER=1`` turns it on for every torchplug device when the
backends activate; :func:`enable`, :func:`disable` and :func:`enabled` do so
from code.

The package, bottom up: ``accesses`` (what is remembered of each access),
``operators`` (what an operator's schema says it touches), ``reports`` (the
error and its stacks), ``state`` (the clocks and the checks), ``mode`` (the
dispatch mode that feeds them); this module turns it on and off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from torchplug import _C
from torchplug.sanitizer.mode import SanitizerMode
from torchplug.sanitizer.reports import StreamRaceError
from torchplug.sanitizer.state import SanitizerState

__all__ = ["StreamRaceError", "disable", "enable", "enabled", "is_enabled"]

_log = logging.getLogger(__name__)

_lock = threading.Lock()
_state: SanitizerState | None = None
_global_mode: SanitizerMode | None = None


def _torchplug_device_types() -> frozenset[str]:
    return frozenset(_C.registered_backends())


def _start() -> SanitizerState:
    global _state
    if _state is None:
        _C.set_stream_trace_enabled(True)
        _state = SanitizerState(_torchplug_device_types())
    else:
        _state.device_types = _torchplug_device_types()
    return _state


def _stop_if_unused() -> None:
    global _state
    if _global_mode is None and not _active_here():
        _C.set_stream_trace_enabled(False)
        _state = None


def _active_here() -> bool:
    return any(isinstance(mode, SanitizerMode) for mode in _get_current_dispatch_mode_stack())


def enable() -> None:
    """Turns the sanitizer on in this thread, and in autograd's backward passes
    it starts, until :func:`disable`. ``TORCHPLUG_SANITIZER=1`` calls this when the
    torchplug backends activate. Calling it again is harmless."""
    global _global_mode
    with _lock:
        state = _start()
        if _global_mode is None:
            _global_mode = SanitizerMode(state)
            _global_mode.__enter__()
            _log.info("stream sanitizer on for %s", ", ".join(sorted(state.device_types)))


def disable() -> None:
    """Turns off what :func:`enable` turned on; the recorded stream order is dropped."""
    global _global_mode
    with _lock:
        if _global_mode is None:
            return
        stack = _get_current_dispatch_mode_stack()
        if not stack or stack[-1] is not _global_mode:
            raise RuntimeError(
                "torchplug.sanitizer.disable() must be called from the thread that enabled it, "
                "outside any dispatch mode entered after it."
            )
        _global_mode.__exit__(None, None, None)
        _global_mode = None
        _stop_if_unused()


def is_enabled() -> bool:
    """Whether operators run by this thread are checked."""
    return _active_here()


@contextmanager
def enabled() -> Iterator[None]:
    """Checks the operators run inside the block (nothing more if it is already on)."""
    if _active_here():
        yield
        return
    with _lock:
        mode = SanitizerMode(_start())
    try:
        with mode:
            yield
    finally:
        with _lock:
            _stop_if_unused()
