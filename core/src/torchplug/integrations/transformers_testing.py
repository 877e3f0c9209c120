"""transformers' test utilities run their tests on torchplug's devices.

``transformers.testing_utils`` chooses ``torch_device`` while it is imported:
``TRANSFORMERS_TEST_DEVICE`` (refused for ``npu`` and ``hpu`` unless
``torch_npu`` or ``habana_frameworks`` is installed), a device spec file
(``TRANSFORMERS_TEST_DEVICE_SPEC``), or CUDA and the vendors it knows, else
the CPU. Right after that import, the device-agnostic tables it dispatches
through (``backend_manual_seed``, ``backend_device_count``, memory statistics,
``backend_synchronize``...) get an entry for every active torchplug device,
and where it chose the CPU by itself while ``torch.accelerator`` is a
torchplug device, ``torch_device`` becomes that device. Test modules read
``torch_device`` when they import it, after this.
"""

from __future__ import annotations

import logging
import os
import types

from torchplug.integrations import devices

log = logging.getLogger("torchplug.integrations")

# testing_utils' dispatch tables and the ``torch.<device>`` function each holds.
TABLES = {
    "BACKEND_MANUAL_SEED": "manual_seed",
    "BACKEND_EMPTY_CACHE": "empty_cache",
    "BACKEND_DEVICE_COUNT": "device_count",
    "BACKEND_RESET_MAX_MEMORY_ALLOCATED": "reset_max_memory_allocated",
    "BACKEND_RESET_PEAK_MEMORY_STATS": "reset_peak_memory_stats",
    "BACKEND_MAX_MEMORY_ALLOCATED": "max_memory_allocated",
    "BACKEND_MEMORY_ALLOCATED": "memory_allocated",
    "BACKEND_SYNCHRONIZE": "synchronize",
}
# The variables with which the user chose the test device.
CHOICES = ("TRANSFORMERS_TEST_DEVICE", "TRANSFORMERS_TEST_DEVICE_SPEC")


def install(testing_utils: types.ModuleType) -> None:
    """Adapts ``transformers.testing_utils``, which has just chosen ``torch_device``."""
    import torch

    for device in devices.active():
        module = getattr(torch, device)
        for table, function in TABLES.items():
            # setdefault: a device spec file's own functions stay.
            getattr(testing_utils, table).setdefault(device, getattr(module, function))
        testing_utils.BACKEND_TORCH_ACCELERATOR_MODULE.setdefault(device, module)
    device = devices.accelerator()
    chosen_by_user = any(os.environ.get(variable) for variable in CHOICES)
    if device is not None and testing_utils.torch_device == "cpu" and not chosen_by_user:
        testing_utils.torch_device = device
        log.info(
            "transformers' tests run on '%s', torch.accelerator's device (torchplug); "
            "TRANSFORMERS_TEST_DEVICE=cpu keeps them on the CPU",
            device,
        )
