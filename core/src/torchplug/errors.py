"""What torchplug raises when a backend cannot be used, and the message that says why.

Below activation, which records the failures, and the device modules that raise
them, so both import it and neither imports the other.
"""

from __future__ import annotations

from torchplug import settings
from torchplug.backend import BackendState, BackendStatus


class BackendLoadError(RuntimeError):
    """A torchplug backend could not be activated; raised on first use of its device."""


class DeviceUnavailableError(AttributeError):
    """``torch.<name>`` of a backend that is installed but not active in this process."""


def explain(status: BackendStatus) -> str:
    """Why ``status``'s backend is not usable and how to change that, in one message."""
    name = status.backend.name
    reason = status.reason.rstrip(". ") or f"it is {status.state.value}"
    if status.state is BackendState.DISABLED:
        remedy = f"Remove '{name}' from {settings.DISABLE} to use it."
    else:
        remedy = ""
    return " ".join(
        part
        for part in (
            f"The '{name}' backend is not active: {reason}.",
            remedy,
            "Run `torchplug doctor` for details.",
        )
        if part
    )
