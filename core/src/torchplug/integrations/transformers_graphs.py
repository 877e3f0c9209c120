"""transformers skips its host checks while a graph is captured, on torchplug
devices too.

Model code calls ``transformers.utils.import_utils.is_tracing`` before a check
that reads a tensor on the host (``_ignore_causal_mask_sdpa``, the padding
warning): a capture must not read the device. It asks
``is_cuda_stream_capturing`` (and XPU's), which knows only CUDA; here it also
answers for the current stream of each active torchplug device.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable

from torchplug.integrations import devices


def install(import_utils: types.ModuleType) -> None:
    """Adapts ``transformers.utils.import_utils``."""
    devices.wrap(import_utils, "is_cuda_stream_capturing", _capturing)


def _capturing(original: Callable[[], bool]) -> Callable[[], bool]:
    @functools.wraps(original)
    def is_cuda_stream_capturing() -> bool:
        if original():
            return True
        import torch

        return any(getattr(torch, name).is_current_stream_capturing() for name in devices.active())

    return is_cuda_stream_capturing
