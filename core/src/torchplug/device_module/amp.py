"""Autocast support (``torch.cuda.amp``'s questions about dtypes)."""

from __future__ import annotations

from typing import Any

import torch


def functions() -> dict[str, Any]:
    """The autocast part of ``torch.<name>``, by attribute name: the same for every device."""

    def get_amp_supported_dtype() -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        """True: the simulated devices compute bfloat16 natively, so emulation
        (``including_emulation``) is never what makes it supported."""
        return True

    return {
        "get_amp_supported_dtype": get_amp_supported_dtype,
        "is_bf16_supported": is_bf16_supported,
    }
