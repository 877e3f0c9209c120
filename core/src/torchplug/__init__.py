"""torchplug: build, auto-load, test and ship out-of-tree PyTorch device backends.

Importing this package is cheap and does not import torch: plugins import it
from their ``torch.backends`` entry point (``torchplug:plugin.<module>``) while
``import torch`` is running. What a plugin uses is exported here: declare a
:class:`Backend`, guard imports with :func:`import_plugin`, check a native
build with :func:`check_build`, and read outcomes with :func:`statuses` and
:func:`explain`.
"""

from pathlib import Path

from torchplug import activation as _activation  # noqa: F401 - installs Backend.autoload's activation
from torchplug.activation.build_checks import check_build, check_torch_version
from torchplug.activation.entry_points import import_plugin, plugin, privateuse1_candidates
from torchplug.activation.records import import_failures, shadowed, statuses
from torchplug.backend import Backend, BackendState, BackendStatus
from torchplug.device_kind import DEVICE_KINDS, DeviceKind
from torchplug.errors import BackendLoadError, DeviceUnavailableError, explain

__version__ = "0.1.0"

__all__ = [
    "DEVICE_KINDS",
    "Backend",
    "BackendLoadError",
    "BackendState",
    "BackendStatus",
    "DeviceKind",
    "DeviceUnavailableError",
    "__version__",
    "check_build",
    "check_torch_version",
    "explain",
    "get_cmake_dir",
    "get_device_kernel_image",
    "get_include",
    "get_remote_driver",
    "get_simulator_driver",
    "import_failures",
    "import_plugin",
    "plugin",
    "privateuse1_candidates",
    "shadowed",
    "statuses",
]


def get_include() -> str:
    """The directory of the C/C++ headers for plugins' native kernels
    (``torchplug/kernel_scope.h``), for a build system's include path."""
    return str(Path(__file__).with_name("include"))


def get_cmake_dir() -> str:
    """The directory of torchplug's CMake package (``torchplugConfig.cmake``):
    pass it as ``torchplug_DIR`` to ``find_package(torchplug CONFIG)``."""
    return str(Path(__file__).with_name("cmake"))


def _bundled_file(folder: str, file_name: str) -> str:
    # Shipped beside the Python sources, or in an editable install beside the
    # installed native builds (the package's other path entry).
    for root in map(Path, __path__):
        if (root / folder).is_dir():
            return str(root / folder / file_name)
    raise BackendLoadError("torchplug's native core is not installed: reinstall torchplug.")


def _bundled_driver(file_name: str) -> str:
    return _bundled_file("drivers", file_name)


def get_device_kernel_image(image_format: str) -> str | None:
    """The core's device kernels as a module image of ``image_format`` (what a
    driver's kernel-modules extension names), or None when torchplug ships none
    of that format. The core loads it into a backend's devices itself; the path
    is for checking a driver with it (``$TORCHPLUG_KERNEL_IMAGE``)."""
    path = _bundled_file("device_kernels", f"{image_format}.so")
    return path if Path(path).is_file() else None


def get_simulator_driver() -> str:
    """The simulator's driver library (``libtorchplug_simulator.so``): the
    interface of ``torchplug/driver.h`` over the simulated devices torchplug's
    backends run on. The driver conformance suite runs against it; it needs
    neither torch nor Python."""
    return _bundled_driver("libtorchplug_simulator.so")


def get_remote_driver() -> str:
    """The remote driver's library (``libtorchplug_remote.so``): simulated
    devices whose memory lives in a device process the driver starts
    (``torchplug-device``), so the using process reaches it only through the
    driver's copies, as it would a discrete accelerator's. Pass it as
    ``Backend(driver=...)``; its client options are
    ``"devices=<count>;memory=<bytes per device>"``."""
    return _bundled_driver("libtorchplug_remote.so")
