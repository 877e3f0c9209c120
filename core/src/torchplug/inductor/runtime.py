"""What Inductor's generated wrappers call on a torchplug device, besides the
launch and allocation fast paths in ``torchplug._C``."""

from __future__ import annotations

from collections.abc import Callable

import torch


def raw_stream_getter(device_type: str) -> Callable[[int], int]:
    module = getattr(torch, device_type)

    def get_raw_stream(index: int) -> int:
        return module.current_stream(index).stream_id

    return get_raw_stream
