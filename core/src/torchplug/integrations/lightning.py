"""Lightning's Trainer trains on torchplug's devices.

Lightning knows accelerators through its ``AcceleratorRegistry`` (a public
extension point): every active torchplug device is registered under its
name, so ``Trainer(accelerator="foo")`` works. The rest is decided in
``_AcceleratorConnector``, which knows only CUDA, MPS and XLA by class:

- ``accelerator="auto"`` picks the CPU when none of those is present; it
  picks ``torch.accelerator``'s device when that is a torchplug device;
- for one device, the ``"auto"`` strategy is a ``SingleDeviceStrategy`` on
  the CPU unless the accelerator is CUDA's or MPS's, so any other accelerator
  (one of the user's own included) would train on the CPU; on a torchplug
  device it is a ``SingleDeviceStrategy`` on that device;
- ``precision="16-mixed"``/``"bf16-mixed"`` autocast on CUDA for every
  accelerator but the CPU and MPS, which on another device changes nothing;
  on a torchplug device they autocast there, fp16 with the device's own
  ``GradScaler``.

The connector module's globals name Lightning's classes, so the same code
adapts ``lightning.pytorch`` and the standalone ``pytorch_lightning``.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from torchplug.integrations import devices

MIXED_PRECISION = ("16-mixed", "bf16-mixed")


def install(connector_module: types.ModuleType) -> None:
    """Adapts ``<lightning>.trainer.connectors.accelerator_connector``."""
    registry = connector_module.AcceleratorRegistry
    for device in devices.active():
        if device not in registry:
            accelerator = accelerator_class(connector_module.Accelerator, device)
            registry.register(device, accelerator, description=accelerator.__name__)
    connector = connector_module._AcceleratorConnector
    devices.wrap(connector, "_choose_auto_accelerator", _auto_accelerator)
    devices.wrap(connector, "_choose_strategy", lambda f: _strategy(f, connector_module))
    devices.wrap(connector, "_check_and_init_precision", lambda f: _precision(f, connector_module))


def accelerator_class(base: type, device: str) -> type:
    """A Lightning ``Accelerator`` subclass of ``base`` for the torchplug device ``device``."""
    import torch

    module = getattr(torch, device)

    def setup_device(self: Any, root: torch.device) -> None:
        if root.type != device:
            raise ValueError(
                f"The {device} accelerator cannot set up device {root}; pass a {device} device."
            )
        module.set_device(root)

    def teardown(self: Any) -> None:
        """Nothing to release: the caching allocator keeps serving the process."""

    def get_device_stats(self: Any, root: Any) -> dict[str, Any]:
        return module.memory_stats(root)

    def parse_devices(requested: int | str | list[int]) -> list[int]:
        return parse_device_indices(device, requested, module.device_count())

    def get_parallel_devices(indices: list[int]) -> list[torch.device]:
        return [torch.device(device, index) for index in indices]

    def auto_device_count() -> int:
        # devices="auto" is one device: with more, Lightning starts DDP processes
        # whose process group backend it picks for CUDA or the CPU.
        return 1

    namespace = {
        "__doc__": f"Lightning's accelerator for torchplug's '{device}' device.",
        "__module__": __name__,
        "setup_device": setup_device,
        "teardown": teardown,
        "get_device_stats": get_device_stats,
        "parse_devices": staticmethod(parse_devices),
        "get_parallel_devices": staticmethod(get_parallel_devices),
        "auto_device_count": staticmethod(auto_device_count),
        "is_available": staticmethod(module.is_available),
        "name": staticmethod(lambda: device),
    }
    return type(f"{device.capitalize()}Accelerator", (base,), namespace)


def parse_device_indices(device: str, requested: int | str | list[int], count: int) -> list[int]:
    """Lightning's ``devices=`` (a count, ``-1`` for all, ``"0,1"`` or a list of
    indices) as the indices of ``device``, or a ValueError naming what there is."""
    if isinstance(requested, str):
        text = requested.strip()
        requested = [int(part) for part in text.split(",") if part] if "," in text else int(text)
    if isinstance(requested, int):
        requested = list(range(count)) if requested == -1 else list(range(requested))
    indices = list(requested)
    missing = [index for index in indices if not 0 <= index < count]
    if missing or not indices:
        raise ValueError(
            f"devices={requested!r} asks for {device} devices {missing or indices} but this process "
            f"has {count} (indices 0 to {count - 1}); TORCHPLUG_DEVICE_COUNT sets how many."
        )
    return indices


def _device_of(connector: Any) -> str | None:
    """The torchplug device the connector's accelerator runs on, if it runs on one."""
    import torch

    parallel = connector._parallel_devices
    if not parallel or not isinstance(parallel[0], torch.device | str):
        return None
    device = torch.device(parallel[0]).type
    return device if device in devices.active() else None


def _auto_accelerator(original: staticmethod) -> staticmethod:
    def choose_auto_accelerator() -> str:
        chosen = original.__func__()
        device = devices.accelerator() if chosen == "cpu" else None
        return chosen if device is None else device

    return staticmethod(choose_auto_accelerator)


def _strategy(original: Callable[[Any], Any], lightning: types.ModuleType) -> Callable[[Any], Any]:
    def choose_strategy(connector: Any) -> Any:
        one_device = connector._num_nodes_flag == 1 and len(connector._parallel_devices) == 1
        if not one_device or _device_of(connector) is None:
            return original(connector)
        return lightning.SingleDeviceStrategy(device=connector._parallel_devices[0])

    return choose_strategy


def _precision(original: Callable[[Any], Any], lightning: types.ModuleType) -> Callable[[Any], Any]:
    def check_and_init_precision(connector: Any) -> Any:
        device = _device_of(connector)
        # Decided before calling the original, which would build CUDA's GradScaler
        # (and warn that it turns itself off) for a plugin this discards.
        if (
            device is None
            or connector._precision_plugin_flag is not None
            or connector._precision_flag not in MIXED_PRECISION
            or type(connector.strategy)
            not in (lightning.SingleDeviceStrategy, lightning.DDPStrategy)
        ):
            return original(connector)
        connector._validate_precision_choice()
        return lightning.MixedPrecision(connector._precision_flag, device)

    return check_and_init_precision
