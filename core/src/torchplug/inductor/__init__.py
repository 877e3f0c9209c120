"""torch.compile for every torchplug device, in two parts.

- :mod:`torchplug.inductor.registration`: the device as Dynamo and Inductor see
  it, through their extension points (device interface, C++ scheduling, a
  wrapper that launches each generated kernel as a device kernel, device op
  overrides, a cache key covering this whole package).
- :mod:`torchplug.inductor.replacements`: every torch function replaced where
  no extension point reaches; :mod:`torchplug.inductor.verification` checks
  each against the installed torch before installing any, and falls back with
  one warning when one differs.

Activation only records the device name and watches for Dynamo and Inductor
being imported (:mod:`torchplug.inductor.hooks`), so ``import torch`` pays
nothing for it: the registration and the checks run when the user's first
compile imports them.
"""

from __future__ import annotations

import functools
import types

from torchplug.inductor.hooks import after_import

_devices: list[str] = []


def enable(device_type: str) -> None:
    """Give ``device_type`` torch.compile support once Dynamo/Inductor load."""
    if device_type in _devices:
        return
    _devices.append(device_type)
    after_import("torch._dynamo", functools.partial(_register_interface, device_type))
    after_import("torch._inductor.compile_fx", functools.partial(_register_codegen, device_type))


def enabled_devices() -> tuple[str, ...]:
    return tuple(_devices)


def _register_interface(device_type: str, dynamo: types.ModuleType) -> None:
    from torchplug.inductor import registration, verification

    try:
        registration.register_interface(device_type)
    except (ImportError, AttributeError, TypeError) as error:
        verification.fall_back(f"Dynamo's device interface registration failed ({error})")


def _register_codegen(device_type: str, compile_fx: types.ModuleType) -> None:
    from torchplug.inductor import registration, verification

    if not verification.activate(enabled_devices):
        return
    try:
        registration.register_codegen(device_type, enabled_devices)
    except (ImportError, AttributeError, TypeError) as error:
        verification.fall_back(f"Inductor's backend registration failed ({error})")
