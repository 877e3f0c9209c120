"""The native interface for plugins' kernels: headers and the capsule they fetch."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import torchplug
from torchplug import _C


def test_headers_are_found_through_get_include() -> None:
    include = Path(torchplug.get_include())
    assert (include / "torchplug" / "kernel_scope.h").is_file()
    assert (include / "torchplug" / "kernel_api.h").is_file()


def test_cmake_package_is_found_through_get_cmake_dir() -> None:
    config = Path(torchplug.get_cmake_dir()) / "torchplugConfig.cmake"
    assert "function(torchplug_add_extension" in config.read_text()


def test_capsule_carries_the_table_the_headers_describe() -> None:
    header = (Path(torchplug.get_include()) / "torchplug" / "kernel_api.h").read_text()
    name = re.search(r'#define TORCHPLUG_KERNEL_API_CAPSULE "([^"]+)"', header)[1]
    version = int(re.search(r"#define TORCHPLUG_KERNEL_API_VERSION (\d+)", header)[1])
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(_C._kernel_api, name.encode())
    assert ctypes.c_uint.from_address(table).value == version
