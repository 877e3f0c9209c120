"""The core's native modules, built once per supported torch minor release.

The modules that compile against torch's C++ API (``_C``, ``_distributed`` and
the facts of their build, ``_build_info``) can only load into the torch minor
release they were built for. A torchplug install holds them in one folder per
release, ``torchplug/torch-<major>.<minor>/`` (a wheel carries a folder per
supported release, merged by ``tools/release.py``; a source build has the one
of the torch it was built against); drivers, device kernels and headers are
torch-free and shared. ``torchplug/_C.py`` and its two siblings load the
running torch's build under their own names, so the rest of the package
imports ``torchplug._C`` as a module like any other.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

from torchplug.errors import BackendLoadError

FOLDER_PREFIX = "torch-"


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def package_folders() -> list[Path]:
    """The torchplug package's folders (an editable install has two: the
    sources and the installed build outputs)."""
    spec = importlib.util.find_spec("torchplug")  # imported already: its spec only
    return [Path(folder) for folder in (spec.submodule_search_locations or [])]


def installed_builds() -> dict[str, Path]:
    """The torch minor releases ("2.15") this install has a build for, oldest
    first, with their folders. Does not import torch."""
    found: dict[str, Path] = {}
    for root in package_folders():
        for folder in root.glob(f"{FOLDER_PREFIX}*"):
            if folder.is_dir():
                found.setdefault(folder.name[len(FOLDER_PREFIX) :], folder)
    return {release: found[release] for release in sorted(found, key=_release_key)}


def running_torch() -> str:
    import torch

    return torch.__version__.split("+")[0]


def build_folder() -> Path:
    """The folder of the build for the running torch; BackendLoadError, naming
    the running torch and the releases there are builds for, when there is none."""
    running = running_torch()
    release = ".".join(running.split(".")[:2])
    builds = installed_builds()
    if release in builds:
        return builds[release]
    if not builds:
        raise BackendLoadError(
            "torchplug's native core is not installed (no torch-<release> folder in "
            f"{', '.join(map(str, package_folders()))}): reinstall torchplug."
        )
    supported = ", ".join(builds)
    newest = list(builds)[-1]
    raise BackendLoadError(
        f"torchplug {metadata.version('torchplug')} has native builds for torch {supported}, but torch {running} "
        f"is running; `pip install 'torch=={newest}.*'`, or install a torchplug release "
        f"built for torch {release}."
    )


def load(name: str) -> ModuleType:
    """Loads ``torchplug.<name>`` from the running torch's build folder and
    puts it in ``sys.modules`` under that name."""
    full_name = f"torchplug.{name}"
    folder = build_folder()
    spec = importlib.machinery.PathFinder.find_spec(name, [str(folder)])
    if spec is None:
        raise BackendLoadError(
            f"{full_name} is missing from {folder}: the install is incomplete; reinstall torchplug."
        )
    spec = importlib.util.spec_from_file_location(full_name, spec.origin)
    module = importlib.util.module_from_spec(spec)
    sys.modules[full_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[full_name]
        raise
    return module
