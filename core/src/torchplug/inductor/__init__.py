"""torch.compile for every torchplug device.

Activation only records the device name and watches for Dynamo and Inductor
being imported (:mod:`torchplug.inductor.hooks`), so ``import torch`` pays
nothing for it. When they load, the device gets Dynamo's device interface
(:mod:`torchplug.inductor.interface`) and Inductor's C++ scheduling with a
wrapper that launches each generated kernel as a device kernel
(:mod:`torchplug.inductor.codegen`).
"""

from __future__ import annotations

from torchplug.inductor.hooks import after_import

_devices: list[str] = []


def enable(device_type: str) -> None:
    """Give ``device_type`` torch.compile support once Dynamo/Inductor load."""
    if device_type in _devices:
        return
    _devices.append(device_type)
    after_import("torch._dynamo.device_interface", _register_interfaces)
    after_import("torch._inductor.codegen.common", _register_codegen)
    after_import("torch._inductor.compile_fx", _explain_failures)


def enabled_devices() -> tuple[str, ...]:
    return tuple(_devices)


def _register_interfaces(module: object) -> None:
    from torchplug.inductor import interface

    interface.install(module, enabled_devices)


def _register_codegen(module: object) -> None:
    from torchplug.inductor import codegen

    codegen.install(module, enabled_devices)


def _explain_failures(module: object) -> None:
    from torchplug.inductor import errors

    errors.install(module, enabled_devices)
