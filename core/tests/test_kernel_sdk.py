"""The native interface for plugins' kernels: headers and the capsule they fetch."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

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


def test_capsule_offers_what_stable_abi_kernels_call() -> None:
    """Version 3's members (for kernels built against torch's stable ABI) are set."""
    header = (Path(torchplug.get_include()) / "torchplug" / "kernel_api.h").read_text()
    table_text = re.search(
        r"typedef struct TorchplugKernelApi \{(.*?)\} TorchplugKernelApi;", header, re.S
    )[1]
    members = re.findall(r"\(\*(\w+)\)", table_text)
    assert members[-3:] == ["check_no_overlap", "resize_output", "device_name"]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(_C._kernel_api, b"torchplug._C._kernel_api")
    pointer_size = ctypes.sizeof(ctypes.c_void_p)
    functions = (ctypes.c_void_p * len(members)).from_address(table + pointer_size)
    assert all(functions), "a member of the kernel API table is NULL"


PROBE_PROJECT = """
cmake_minimum_required(VERSION 3.25)
project(stable_probe LANGUAGES CXX)
find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
set(torchplug_DIR "{cmake_dir}")
find_package(torchplug CONFIG REQUIRED)
torchplug_add_extension(probe PY_LIMITED_API STABLE_ABI probe.cpp)
"""

# An extension that still calls torch's C++ API. Torch's ATen headers refuse
# to compile under TORCH_TARGET_VERSION already; a call that gets past them
# (a declaration of its own, a header without that guard) is caught at link.
CXX_API_PROBE = """
#include <string>
namespace c10 {
std::string get_privateuse1_backend(bool lower_case);
}
extern "C" __attribute__((visibility("default"))) size_t probe_entry() {
  return c10::get_privateuse1_backend(true).size();
}
"""

STABLE_API_PROBE = """
#include <torch/csrc/stable/ops.h>
extern "C" __attribute__((visibility("default"))) int64_t probe_entry(AtenTensorHandle handle) {
  return torch::stable::empty_like(torch::stable::Tensor(handle)).numel();
}
"""


def _build_probe(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "CMakeLists.txt").write_text(
        PROBE_PROJECT.format(cmake_dir=torchplug.get_cmake_dir())
    )
    (tmp_path / "probe.cpp").write_text(source)
    cmake = shutil.which("cmake")
    assert cmake, "cmake is needed to build extensions"
    configure = subprocess.run(
        [cmake, "-S", tmp_path, "-B", tmp_path / "build", f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    return subprocess.run(
        [cmake, "--build", tmp_path / "build"], capture_output=True, text=True, check=False
    )


@pytest.mark.slow
def test_stable_abi_build_refuses_an_extension_that_calls_torchs_cxx_api(tmp_path: Path) -> None:
    build = _build_probe(tmp_path, CXX_API_PROBE)
    assert build.returncode != 0
    output = build.stdout + build.stderr
    assert "is built with STABLE_ABI but imports" in output
    assert "c10::get_privateuse1_backend" in output
    assert "torch/csrc/stable" in output


@pytest.mark.slow
def test_stable_abi_build_accepts_an_extension_on_the_stable_abi(tmp_path: Path) -> None:
    build = _build_probe(tmp_path, STABLE_API_PROBE)
    assert build.returncode == 0, build.stdout + build.stderr
    assert list((tmp_path / "build").glob("probe*.so"))


def test_check_build_takes_a_stable_abi_build_into_later_torch_releases() -> None:
    import torch

    running = tuple(int(part) for part in torch.__version__.split(".")[:2])
    core = types.SimpleNamespace(TORCHPLUG_VERSION="0.1.0", KERNEL_API_VERSION=0)
    older = types.SimpleNamespace(
        TORCH_VERSION="2.99.0", TORCH_STABLE_ABI=f"{running[0]}.{running[1] - 1}", **vars(core)
    )
    torchplug.check_build("probe", older)  # built against a newer torch, targeting an older one
    newer = types.SimpleNamespace(
        TORCH_VERSION="2.99.0", TORCH_STABLE_ABI=f"{running[0]}.{running[1] + 1}", **vars(core)
    )
    with pytest.raises(
        torchplug.BackendLoadError,
        match=rf"probe was built against torch's stable ABI for torch {running[0]}\.{running[1] + 1} "
        r"and later, but torch .* is running; `pip install 'torch>=",
    ):
        torchplug.check_build("probe", newer)
