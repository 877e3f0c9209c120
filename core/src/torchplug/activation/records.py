"""The one record of what activation did in this process, shared by its steps.

Every step of activation (the entry-point guard, PrivateUse1 arbitration,
registration) writes here under one re-entrant lock; ``torchplug doctor``,
serialization and the device modules read it.
"""

from __future__ import annotations

import logging
import threading

from torchplug import settings
from torchplug.backend import BackendState, BackendStatus
from torchplug.errors import BackendLoadError

log = logging.getLogger("torchplug")

# Re-entrant: activating one backend may import another plugin, which activates too.
lock = threading.RLock()
# By device name: the backend that holds the name (or failed, lost, was disabled).
by_device: dict[str, BackendStatus] = {}
# Backends whose device name another distribution already holds.
shadowed_backends: list[BackendStatus] = []
# By distribution (or module when unknown): plugin modules that raised on import.
failed_imports: dict[str, BackendStatus] = {}


class PrivateUse1Record:
    __slots__ = ("holder",)

    def __init__(self) -> None:
        # The backend the key went to (active, or failed after taking it); None until chosen.
        self.holder: BackendStatus | None = None


privateuse1 = PrivateUse1Record()


def statuses() -> dict[str, BackendStatus]:
    """The outcome of every activation attempted in this process, by device name."""
    with lock:
        return dict(by_device)


def shadowed() -> list[BackendStatus]:
    """Backends that lost their device name to another distribution providing it."""
    with lock:
        return list(shadowed_backends)


def import_failures() -> dict[str, BackendStatus]:
    """Plugin modules that raised when their entry point imported them, by distribution."""
    with lock:
        return dict(failed_imports)


def describe(error: BaseException) -> str:
    """An exception as a reason: its type and message, never an empty message."""
    message = str(error).strip()
    return (
        f"{type(error).__name__}: {message}" if message else f"{type(error).__name__} (no message)"
    )


def report(status: BackendStatus) -> None:
    """Logs an outcome once, at the level it deserves."""
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
        holder = privateuse1.holder
        chosen = holder is not None and holder.backend.name == settings.current().privateuse1
        level = logging.INFO if chosen else logging.WARNING
        log.log(level, "torchplug backend '%s' is inactive: %s", name, status.reason)
    elif status.state is BackendState.DISABLED:
        log.debug("torchplug backend '%s' is disabled: %s", name, status.reason)


def strict_error(status: BackendStatus) -> BackendLoadError:
    """What ``TORCHPLUG_STRICT=1`` raises for a backend that failed to load."""
    error = BackendLoadError(
        f"torchplug backend '{status.backend.name}' failed to load ({settings.STRICT}=1): "
        f"{status.reason}"
    )
    error.__cause__ = status.error
    return error
