"""Brings up the simulated ``hpu`` device (importing this module is enough)."""

import vhabana_frameworks

vhabana_frameworks.is_loaded = True

from torchplug import Backend  # noqa: E402 - the guard must be set before torch can re-enter

backend = Backend(
    name="hpu",
    dispatch_key="hpu",
    distribution="vhabana_frameworks",
    module="vhabana_frameworks.torch.hpu",
)
backend.autoload()

from vhabana_frameworks.torch import core, hpu  # noqa: E402

__all__ = ["backend", "core", "hpu"]
