"""Training frameworks on torchplug's devices: one module per framework.

HF accelerate and the Trainer find accelerators by module name (``torch_npu``,
``habana_frameworks``), transformers' test utilities check those modules
before accepting a device, and Lightning picks a CPU strategy for any
accelerator it does not know; none asks ``torch.accelerator``. Each module
here adapts one framework through its own extension points where it has them,
and otherwise changes one of its answers only where the framework would
ignore an active torchplug device, so anything the user set explicitly wins.

``import torch`` imports none of them: activation watches the framework module
each one adapts (``activation/registration.py``, with
:func:`torchplug.inductor.hooks.after_import`) and :func:`install` runs
right after the framework first imports it. What each needs on each device is
in ``docs/frameworks.md``.
"""

from __future__ import annotations

import importlib
import logging
import types

log = logging.getLogger("torchplug.integrations")

# What a user can do instead when an integration cannot adapt its framework.
WITHOUT_INTEGRATION = {
    "accelerate": "set ACCELERATE_TORCH_DEVICE to the device, e.g. ACCELERATE_TORCH_DEVICE=foo",
    "transformers": "set ACCELERATE_TORCH_DEVICE to the device, e.g. ACCELERATE_TORCH_DEVICE=foo",
    "transformers_graphs": (
        "pass attention_mask and position_ids to the model: its host checks then run "
        "outside a graph capture"
    ),
    "transformers_testing": (
        "set TRANSFORMERS_TEST_DEVICE_SPEC to a device spec file "
        "(torchplug_testing.transformers_spec.write)"
    ),
    "lightning": (
        "pass Trainer(accelerator=YourAccelerator(), strategy=SingleDeviceStrategy(device='foo'))"
    ),
}


def install(integration: str, framework: types.ModuleType) -> None:
    """Adapts ``framework`` (a module just imported) with ``torchplug.integrations.<integration>``.

    Never raises: a framework release the integration does not know keeps
    working as it would without torchplug, and the warning says what to set.
    """
    try:
        importlib.import_module(f"torchplug.integrations.{integration}").install(framework)
    except Exception:
        log.warning(
            "torchplug could not adapt %s to its devices, which it may then leave on the CPU; "
            "instead, %s",
            framework.__name__,
            WITHOUT_INTEGRATION[integration],
            exc_info=True,
        )
