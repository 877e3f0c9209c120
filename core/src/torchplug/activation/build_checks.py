"""Checks a native build makes before loading: the torch and the core it was built for."""

from __future__ import annotations

import types
from importlib import metadata

from torchplug.errors import BackendLoadError


def check_torch_version(package: str = "torchplug", built_for: str | None = None) -> None:
    """Refuses to load a native build into a torch it was not compiled for.

    ``built_for`` is the torch version the package's extension was built
    against (its ``_build_info.TORCH_VERSION``, which CMake's
    ``torchplug_install_build_info`` writes); by default, the core's build for
    the running torch's minor release, which must be installed
    (torchplug.torch_builds).
    """
    import torch

    if built_for is None:
        from torchplug import _build_info

        built_for = _build_info.TORCH_VERSION
    running = torch.__version__.split("+")[0]
    # Torch keeps its C++ ABI within a minor release (2.15.0 and 2.15.1), not across.
    built_minor = ".".join(built_for.split(".")[:2])
    if ".".join(running.split(".")[:2]) != built_minor:
        raise BackendLoadError(
            f"{package} was built for torch {built_for} but torch {running} is "
            f"running; install the {package} release built for torch {running}, or "
            f"`pip install 'torch=={built_minor}.*'`."
        )


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def check_stable_abi_torch(package: str, target: str) -> None:
    """Refuses to load an extension built against torch's stable ABI for
    torch ``target`` (major.minor) and later into an older torch."""
    import torch

    running = torch.__version__.split("+")[0]
    if _minor(running) < _minor(target):
        raise BackendLoadError(
            f"{package} was built against torch's stable ABI for torch {target} and later, but "
            f"torch {running} is running; `pip install 'torch>={target}'`."
        )


def check_build(package: str, build_info: types.ModuleType) -> None:
    """Refuses to load a plugin's native build into a torch or a torchplug core
    it cannot run with, before anything fails with an undefined symbol.

    ``build_info`` is the plugin's ``_build_info`` module, which CMake's
    ``torchplug_install_build_info`` writes: the torch it was built for (same
    minor release required), or for extensions built against torch's stable
    ABI the oldest torch they target (that release or a later one required),
    and the core's kernel API version it was compiled against (the running
    core must offer at least that one).
    """
    from torchplug import _build_info as core

    stable_since = getattr(build_info, "TORCH_STABLE_ABI", None)
    if stable_since is None:
        check_torch_version(package, build_info.TORCH_VERSION)
    else:
        check_stable_abi_torch(package, stable_since)
    # Builds made before torchplug 0.1.0's wheels recorded no kernel API version.
    needed = getattr(build_info, "KERNEL_API_VERSION", 0)
    offered = getattr(core, "KERNEL_API_VERSION", 0)
    if needed > offered:
        # The installed distribution's version (looked up only here: it scans
        # the path, and every activation passes this check): the torchplug
        # package imports this module, so this module does not import it.
        version = metadata.version("torchplug")
        raise BackendLoadError(
            f"{package} was built against torchplug {build_info.TORCHPLUG_VERSION} (kernel API "
            f"{needed}) but torchplug {version} (kernel API {offered}) is "
            f"installed; `pip install "
            f"'torchplug>={build_info.TORCHPLUG_VERSION}'`, or install the {package} release "
            f"built for torchplug {version}."
        )
