"""What every part of ``torch.<name>`` shares: the backend's identity, its
activation status and, once active, the native core."""

from __future__ import annotations

from typing import Any

import torch

from torchplug.backend import Backend, BackendState, BackendStatus
from torchplug.errors import BackendLoadError, explain


class BoundDevice:
    """One backend's device type as the device module's functions see it.

    Those functions call these methods, never the module's attributes, so a
    plugin's own definition of, say, ``current_device`` on its module does not
    change what the core's functions do.
    """

    def __init__(self, backend: Backend, status: BackendStatus) -> None:
        self.name = backend.name
        self.key = backend.dispatch_key
        self.status = status

    @property
    def active(self) -> bool:
        return self.status.state is BackendState.ACTIVE

    def native(self) -> Any:
        """The native core; while the backend is not active, raises why."""
        if not self.active:
            raise BackendLoadError(explain(self.status)) from self.status.error
        from torchplug import _C

        return _C

    def device_count(self) -> int:
        if not self.active:
            return 0
        return self.native().device_count(self.name)

    def current_device(self) -> int:
        return self.native().current_device(self.name)

    def set_device(self, index: int) -> None:
        self.native().set_device(self.name, index)

    def index(self, device: Any = None, optional: bool = True) -> int:
        """The index ``device`` (an index, a device or its string, or None) names,
        checked against the device count.

        As torch.cuda's ``_get_device_index``: a device without an index (None,
        ``"foo"``) means the current device when ``optional``, and is refused
        otherwise.
        """
        if device is None or isinstance(device, int):
            index = device
        else:
            parsed = torch.device(device)
            if parsed.type != self.name:
                raise ValueError(f"Expected a {self.name} device, got {parsed}.")
            index = parsed.index
        if index is None:
            if not optional:
                raise ValueError(
                    f"Expected a {self.name} device with a specified index or an integer, "
                    f"but got: {device}"
                )
            if device is None:
                return self.current_device()  # valid by construction: no count check
            index = self.current_device()
        count = self.device_count()
        if not 0 <= index < count:
            raise RuntimeError(
                f"Invalid device index {index} for '{self.name}': there are {count} devices "
                f"(valid indices 0..{count - 1})."
            )
        return index
