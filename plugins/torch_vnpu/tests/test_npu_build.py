"""torch_vnpu's operator library is built against torch's stable ABI only."""

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import torchplug
from torch_vnpu import _build_info


def test_operator_library_imports_no_symbol_of_torchs_cxx_api() -> None:
    spec = importlib.util.find_spec("torch_vnpu._C")
    assert spec is not None
    assert spec.origin
    nm = shutil.which("nm")
    assert nm, "binutils' nm is needed"
    imported = subprocess.run(
        [nm, "--dynamic", "--undefined-only", "--demangle", spec.origin],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cxx = [line for line in imported.splitlines() if re.search(r"\b(c10|at|torch|caffe2)::", line)]
    assert cxx == []
    # What it does import from torch: the stable C shim.
    assert re.search(r"\b(aoti_torch|torch)_\w+", imported)


def test_build_records_the_oldest_torch_it_targets() -> None:
    config = (Path(torchplug.get_cmake_dir()) / "torchplugConfig.cmake").read_text()
    target = re.search(r'set\(TORCHPLUG_STABLE_ABI_TARGET "([\d.]+)"\)', config)[1]
    assert target == _build_info.TORCH_STABLE_ABI
