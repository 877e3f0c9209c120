"""Builds the runtime layer with its C++ tests (no torch headers) and runs them."""

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1]
RUNTIME_SOURCES = sorted((CORE / "csrc" / "runtime").glob("*.cpp"))
TEST_SOURCE = CORE / "tests" / "runtime" / "runtime_test.cpp"


def run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def test_runtime_layer_on_its_own(tmp_path: Path) -> None:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("a C++ compiler is required (it also builds the core)")
    # tools/asan.sh adds the sanitizers' flags.
    extra_flags = shlex.split(os.environ.get("TORCHPLUG_RUNTIME_TEST_CXXFLAGS", ""))
    flags = ["-std=c++20", "-O1", "-pthread", *extra_flags, f"-I{CORE / 'csrc'}"]
    binary = tmp_path / "runtime_test"
    sources = [str(TEST_SOURCE), *map(str, RUNTIME_SOURCES)]
    build = run([compiler, *flags, *sources, "-o", str(binary)], timeout=300)
    assert build.returncode == 0, build.stderr
    assert "torch" not in build.stderr
    result = run([str(binary)], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("14 passed, 0 failed")
