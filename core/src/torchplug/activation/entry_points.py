"""The guarded entry point: importing a plugin's module never breaks ``import torch``.

Upstream calls every ``torch.backends`` entry point inside ``import torch`` and
aborts the import on the first exception. A torchplug plugin's entry point is
``torchplug:plugin.<module>``: upstream then only imports ``torchplug`` (which
cannot fail because of the plugin), and calling the entry point imports the
plugin's module under :func:`import_plugin`'s guard.
"""

from __future__ import annotations

import importlib
import sys
from importlib import metadata

from torchplug import settings
from torchplug.activation import records
from torchplug.activation.torch_patches import stand_in_device_module
from torchplug.backend import PRIVATEUSE1_GROUP, Backend, BackendState, BackendStatus
from torchplug.device_kind import kind_of_device
from torchplug.errors import BackendLoadError

# The entry-point value that names a plugin module: ``f"{ENTRY_POINT_PREFIX}{module}"``.
ENTRY_POINT_PREFIX = "torchplug:plugin."


def import_plugin(module: str, device: str | None = None) -> None:
    """Imports a plugin's module for its ``torch.backends`` entry point, never
    breaking ``import torch``: an exception is logged once with its cause,
    recorded for ``torchplug doctor`` (and for ``device``, when named) and
    raised only under ``TORCHPLUG_STRICT=1``."""
    try:
        importlib.import_module(module)
    except Exception as error:
        _record_import_failure(module, device, error)


def privateuse1_candidates() -> list[str]:
    """Installed torchplug backends that want PrivateUse1, from package metadata."""
    return sorted({ep.name for ep in metadata.entry_points(group=PRIVATEUSE1_GROUP)})


def distribution_name(entry_point: metadata.EntryPoint) -> str | None:
    return entry_point.dist.name if entry_point.dist is not None else None


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
    reason = f"importing {module} raised {records.describe(error)}"
    with records.lock:
        if (distribution or module) in records.failed_imports:
            return  # the arbitration and torch's entry point both import it
        key = kind_of_device(device).dispatch_key if device is not None else "privateuse1"
        backend = Backend(name=device or "unknown", dispatch_key=key, distribution=distribution)
        status = BackendStatus(backend, BackendState.FAILED, reason, error=error)
        records.failed_imports[distribution or module] = status
        if device is not None and device not in records.by_device:
            records.by_device[device] = status
            if "torch" in sys.modules:
                stand_in_device_module(sys.modules["torch"], status)
        records.log.warning(
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
            if entry_point.value in (module, f"{ENTRY_POINT_PREFIX}{module}"):
                return distribution_name(entry_point)
    return None


class PluginImporter:
    """A ``torch.backends`` entry point that imports a plugin under torchplug's guard.

    Upstream loads an entry point and calls it with no arguments, so the
    module to import is spelled as the attribute path:
    ``torch_foo = "torchplug:plugin.torch_foo"`` imports ``torch_foo`` and
    ``"torchplug:plugin.vendor.torch"`` imports ``vendor.torch``.
    """

    def __init__(self, module: str = "") -> None:
        self._module = module

    def __getattr__(self, part: str) -> PluginImporter:
        if part.startswith("_"):
            raise AttributeError(part)
        return PluginImporter(f"{self._module}.{part}" if self._module else part)

    def __call__(self) -> None:
        import_plugin(self._module)

    def __repr__(self) -> str:
        return f"<torchplug entry point importing {self._module or '?'}>"


plugin = PluginImporter()
