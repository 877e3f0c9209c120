"""Environment variables that steer torchplug, read when they are needed.

torchplug reads these and never writes them, so child processes inherit
exactly the environment the user set.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"
DISABLE = "TORCHPLUG_DISABLE"
PRIVATEUSE1 = "TORCHPLUG_PRIVATEUSE1"
STRICT = "TORCHPLUG_STRICT"
DEVICE_COUNT = "TORCHPLUG_DEVICE_COUNT"
DEVICE_MEMORY = "TORCHPLUG_DEVICE_MEMORY"
STRICT_MEMORY = "TORCHPLUG_STRICT_MEMORY"
SANITIZER = "TORCHPLUG_SANITIZER"
# Read by the native core when the first kernel launches (kernel_launch.cpp).
LAUNCH_BLOCKING = "TORCHPLUG_LAUNCH_BLOCKING"
WARN_FALLBACK = "TORCHPLUG_WARN_FALLBACK"

DEFAULT_DEVICE_COUNT = 2
DEFAULT_DEVICE_MEMORY = 8 << 30

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """Parses sizes such as ``512MiB``, ``8GiB``, ``8G`` or ``1048576``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise ValueError(
            f"Cannot read {text!r} as a size; write e.g. 512MiB, 8GiB or a byte count."
        )
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit])


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _per_backend(name: str, backend: str) -> str | None:
    """``TORCHPLUG_FOO_DEVICE_COUNT`` overrides ``TORCHPLUG_DEVICE_COUNT`` for backend foo."""
    specific = name.replace("TORCHPLUG_", f"TORCHPLUG_{backend.upper()}_", 1)
    return os.environ.get(specific, os.environ.get(name))


class Settings(NamedTuple):
    autoload: bool
    disabled: frozenset[str]
    privateuse1: str | None
    strict: bool
    strict_memory: bool
    sanitizer: bool
    launch_blocking: bool
    warn_fallback: bool

    def disables(self, device: str, distribution: str | None) -> bool:
        """``TORCHPLUG_DISABLE`` names a device, or a distribution when two provide one device."""
        return device in self.disabled or (
            distribution is not None and distribution in self.disabled
        )

    def as_dict(self) -> dict[str, object]:
        return {
            AUTOLOAD: self.autoload,
            DISABLE: sorted(self.disabled),
            PRIVATEUSE1: self.privateuse1,
            STRICT: self.strict,
            STRICT_MEMORY: self.strict_memory,
            SANITIZER: self.sanitizer,
            LAUNCH_BLOCKING: self.launch_blocking,
            WARN_FALLBACK: self.warn_fallback,
        }


def current() -> Settings:
    disabled = {part.strip() for part in os.environ.get(DISABLE, "").split(",") if part.strip()}
    return Settings(
        autoload=os.environ.get(AUTOLOAD, "1") == "1",
        disabled=frozenset(disabled),
        privateuse1=os.environ.get(PRIVATEUSE1, "").strip() or None,
        strict=_flag(STRICT),
        strict_memory=_flag(STRICT_MEMORY),
        sanitizer=_flag(SANITIZER),
        launch_blocking=_flag(LAUNCH_BLOCKING),
        warn_fallback=_flag(WARN_FALLBACK),
    )


def device_count(backend: str) -> int:
    value = _per_backend(DEVICE_COUNT, backend)
    if value is None:
        return DEFAULT_DEVICE_COUNT
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{DEVICE_COUNT}={value!r} is not a whole number of devices.") from None


def device_memory(backend: str) -> int:
    value = _per_backend(DEVICE_MEMORY, backend)
    return DEFAULT_DEVICE_MEMORY if value is None else parse_bytes(value)
