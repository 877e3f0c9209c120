"""Conformance suite of torchplug driver libraries (``torchplug/driver.h``), without torch.

A vendor checks a driver library on its own::

    python -m torchplug_testing.driver path/to/libdriver.so [--name NAME]

or from Python, ``run_conformance(path)``, which returns a CheckResult per check. The
bindings (``bindings``, ``loader``) use ctypes alone: nothing here imports torch.
"""

from torchplug_testing.driver.loader import Driver, DriverError, DriverLoadError, load
from torchplug_testing.driver.runner import (
    DEFAULT_NAME,
    CheckResult,
    Status,
    run_conformance,
)

__all__ = [
    "DEFAULT_NAME",
    "CheckResult",
    "Driver",
    "DriverError",
    "DriverLoadError",
    "Status",
    "load",
    "run_conformance",
]
