"""The core's native module, as built for the running torch (see torchplug.torch_builds)."""

from torchplug.torch_builds import load

load(__name__.rpartition(".")[2])
