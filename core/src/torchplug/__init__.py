"""torchplug: build, auto-load, test and ship out-of-tree PyTorch device backends.

Importing this package is cheap and does not import torch: plugins import it
from their ``torch.backends`` entry point while ``import torch`` is running.
"""

from pathlib import Path

from torchplug import loader as _loader  # noqa: F401 - installs Backend.autoload's activation
from torchplug.backend import Backend, BackendState, BackendStatus

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendState",
    "BackendStatus",
    "__version__",
    "get_cmake_dir",
    "get_include",
]


def get_include() -> str:
    """The directory of the C/C++ headers for plugins' native kernels
    (``torchplug/kernel_scope.h``), for a build system's include path."""
    return str(Path(__file__).with_name("include"))


def get_cmake_dir() -> str:
    """The directory of torchplug's CMake package (``torchplugConfig.cmake``):
    pass it as ``torchplug_DIR`` to ``find_package(torchplug CONFIG)``."""
    return str(Path(__file__).with_name("cmake"))
