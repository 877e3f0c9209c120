"""What activation changes in the ``torch`` module so an inactive backend says why.

Both are plain attribute and ``sys.modules`` entries torch looks up by name;
no torch function is replaced.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

from torchplug.activation import records
from torchplug.backend import BackendState, BackendStatus
from torchplug.device_kind import kind_of
from torchplug.errors import BackendLoadError, DeviceUnavailableError, explain


@functools.cache
def explain_missing_device_modules(torch: types.ModuleType) -> None:
    """Makes ``torch.<name>`` of an inactive backend raise why, instead of
    "module 'torch' has no attribute". Torch looks its missing attributes up
    in the module's ``__getattr__``; this one answers for torchplug's device
    names first and defers to torch's for everything else."""
    torch_getattr = torch.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        status = records.by_device.get(name)
        if status is not None and status.state not in (BackendState.ACTIVE, BackendState.PENDING):
            raise DeviceUnavailableError(f"torch.{name} is unavailable. {explain(status)}")
        if torch_getattr is None:
            raise AttributeError(f"module 'torch' has no attribute '{name}'")
        return torch_getattr(name)

    torch.__getattr__ = __getattr__


def stand_in_device_module(torch: types.ModuleType, status: BackendStatus) -> None:
    """Tensor creation on a device torch knows by itself (``hpu``) imports
    ``torch.<name>`` to initialise it; when that backend is not active, a
    stand-in there raises why instead of torch's "no module named"."""
    name = status.backend.name
    if not kind_of(status.backend.dispatch_key).known_to_torch:
        return
    if f"torch.{name}" in sys.modules or name in torch.__dict__:
        return
    module = types.ModuleType(f"torch.{name}", f"Stand-in for the inactive '{name}' backend.")

    def _lazy_init() -> None:
        raise BackendLoadError(explain(status)) from status.error

    module._lazy_init = _lazy_init  # type: ignore[attr-defined]
    module.is_available = lambda: False  # type: ignore[attr-defined]
    module.device_count = lambda: 0  # type: ignore[attr-defined]
    sys.modules[f"torch.{name}"] = module
