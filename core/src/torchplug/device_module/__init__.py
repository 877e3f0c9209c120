"""Builds ``torch.<name>``, the device module torch and users call into.

The module mirrors the shape of ``torch.cuda`` (device selection, streams,
events, memory, RNG, fork safety) for any torchplug backend, one concern per
module here as in ``torch/cuda``:

- ``properties``: availability, initialization, the current device, synchronization;
- ``streams``: streams, events, the host-sync debug mode;
- ``memory``: device and pinned host memory statistics and limits;
- ``random``: the per-device default generators;
- ``amp``: autocast's supported dtypes;
- ``fallback``: the report of the operators that ran on the CPU fallback, and its warning;
- ``builder``: assembles them into ``torch.<name>`` for one backend;
- ``tensor_methods``: ``Tensor.<name>()`` for a device on an in-tree key.

While a backend is not active its functions raise the recorded load error,
and ``is_available()`` answers False, so a broken plugin fails where it is used.
"""

from torchplug.device_module.builder import build
from torchplug.device_module.fallback import FallbackOperator, warn_on_fallback
from torchplug.device_module.properties import DeviceProperties
from torchplug.device_module.tensor_methods import add_tensor_methods

__all__ = [
    "DeviceProperties",
    "FallbackOperator",
    "add_tensor_methods",
    "build",
    "warn_on_fallback",
]
