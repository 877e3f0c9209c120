"""Builds the runtime layer with its C++ tests (no torch headers) and runs them."""

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1]
RUNTIME_SOURCES = sorted((CORE / "csrc" / "runtime").glob("*.cpp"))


def test_runtime_layer_on_its_own(tmp_path: Path) -> None:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("a C++ compiler is required (it also builds the core)")
    binary = tmp_path / "runtime_test"
    build = subprocess.run(
        [
            compiler,
            "-std=c++20",
            "-O1",
            "-pthread",
            # tools/asan.sh builds it with the sanitizers.
            *shlex.split(os.environ.get("TORCHPLUG_RUNTIME_TEST_CXXFLAGS", "")),
            f"-I{CORE / 'csrc'}",
            str(CORE / "tests" / "runtime" / "runtime_test.cpp"),
            *map(str, RUNTIME_SOURCES),
            "-o",
            str(binary),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    assert "torch" not in build.stderr
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("13 passed, 0 failed")
