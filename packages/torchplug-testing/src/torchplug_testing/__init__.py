"""Device-generic conformance suite for PyTorch device backends (a pytest plugin).

``pytest --device NAME`` runs the suite against the device ``NAME`` and compares
every result with the CPU's. Nothing here imports torch at import time: the
plugin is loaded by every pytest run of an environment it is installed in.
"""

__version__ = "0.1.0"

DEVICE_ENV = "TORCHPLUG_TEST_DEVICE"
EXPECTATIONS_ENV = "TORCHPLUG_TEST_EXPECTATIONS"
EXPECTATIONS_ENTRY_POINTS = "torchplug_testing.expectations"
