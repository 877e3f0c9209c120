"""The driver conformance suite (torchplug_testing.driver): its ctypes bindings against
driver.h, its verdict on the bundled drivers (simulator, remote), and on libraries that are no
driver."""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchplug_testing.driver import DriverLoadError, Status, load, run_conformance
from torchplug_testing.driver.bindings import (
    API_MAJOR,
    API_MEMBERS,
    API_MINOR,
    ENTRY_POINT,
    EXTENSIONS,
    IPC_HANDLE_SIZE,
    KERNEL_FORMAT_HOST_ELF,
    STRUCT_SIZES,
    STRUCTS,
    Capability,
    CopyKind,
    ErrorCode,
    ExtensionType,
    KernelArgKind,
    SimulatorFault,
)
from torchplug_testing.driver.harness import CHECKS

# The C names of the Python enums' members: prefix + member name.
ENUM_PREFIXES = {
    ErrorCode: "TPD_",
    Capability: "TPD_CAPABILITY_",
    CopyKind: "TPD_COPY_",
    ExtensionType: "TPD_EXTENSION_",
    SimulatorFault: "TPD_SIMULATOR_",
    KernelArgKind: "TPD_KERNEL_ARG_",
}


def _torchplug_directories() -> list[Path]:
    """torchplug's package directories, found without importing it (that imports torch):
    an editable install has the sources in one and the built modules in another."""
    spec = importlib.util.find_spec("torchplug")
    return [Path(location) for location in (spec.submodule_search_locations or [])] if spec else []


def _find(relative: str) -> Path | None:
    return next((d / relative for d in _torchplug_directories() if (d / relative).is_file()), None)


@pytest.fixture(scope="module")
def include_dir() -> Path:
    header = _find("include/torchplug/driver.h")
    if header is None:
        # A checkout whose torchplug is not installed: the header beside these tests.
        header = (
            Path(__file__).resolve().parents[3] / "core/src/torchplug/include/torchplug/driver.h"
        )
    assert header.is_file(), f"driver.h not found (looked in {_torchplug_directories()})"
    return header.parents[1]


@pytest.fixture(scope="module")
def cc() -> str:
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (cc) on PATH: the header's layout cannot be compiled")
    return compiler


def _compile(cc: str, source: str, output: Path, include_dir: Path, *flags: str) -> Path:
    c_file = output.with_suffix(".c")
    c_file.write_text(source)
    command = [
        cc,
        "-std=gnu11",
        "-Wall",
        "-Werror",
        f"-I{include_dir}",
        *flags,
        str(c_file),
        "-o",
        str(output),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stderr}"
    return output


def _layout_program() -> str:
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "torchplug/driver.h"']

    def same_type(expression: str, c_type: str, what: str) -> None:
        lines.append(
            f'_Static_assert(__builtin_types_compatible_p(__typeof__({expression}), {c_type}), "{what}");'
        )

    tables = [("TPD_Api", API_MEMBERS)] + [(s.__name__, m) for s, m in EXTENSIONS.values()]
    for table, members in tables:
        for name, args, error in members:
            result = "TPD_Error*" if error else "void"
            same_type(
                f"(({table}*)0)->{name}", f"{result} (*)({args.__name__}*)", f"{table}.{name}"
            )
    same_type("(TPD_HostFunction)0", "int (*)(void*, char*, size_t)", "TPD_HostFunction")
    same_type(
        "(TPD_HostElfKernel)0",
        "int (*)(const TPD_KernelArg*, size_t, char*, size_t)",
        "TPD_HostElfKernel",
    )
    lines.append("int main(void) {")
    for struct in STRUCTS:
        name = struct.__name__
        lines.append(f'  printf("sizeof {name} %zu\\n", sizeof({name}));')
        for field, *_ in struct._fields_:
            lines.append(f'  printf("offset {name}.{field} %zu\\n", offsetof({name}, {field}));')
            lines.append(f'  printf("size {name}.{field} %zu\\n", sizeof((({name}*)0)->{field}));')
        if struct in STRUCT_SIZES:
            lines.append(f'  printf("struct_size {name} %zu\\n", (size_t){name}_STRUCT_SIZE);')
    constants = {f"{prefix}{m.name}" for enum, prefix in ENUM_PREFIXES.items() for m in enum}
    constants |= {"TPD_API_MAJOR", "TPD_API_MINOR", "TPD_IPC_HANDLE_SIZE"}
    for constant in sorted(constants):
        lines.append(f'  printf("constant {constant} %lld\\n", (long long){constant});')
    lines += [
        '  printf("entry_point %s\\n", TPD_ENTRY_POINT);',
        '  printf("host_elf_format %s\\n", TPD_KERNEL_FORMAT_HOST_ELF);',
        "  return 0;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def test_bindings_match_the_header(cc: str, include_dir: Path, tmp_path: Path) -> None:
    """Every struct, member offset and size, STRUCT_SIZE macro, enum constant and table
    signature of driver.h equals the bindings'."""
    header = (include_dir / "torchplug/driver.h").read_text()
    # Nothing of the header is missing from the bindings.
    declared = set(re.findall(r"typedef struct\s*\w*\s*\{[^}]*\}\s*(TPD_\w+);", header))
    assert declared == {struct.__name__ for struct in STRUCTS}
    assert set(re.findall(r"#define (TPD_\w+)_STRUCT_SIZE\b", header)) == {
        s.__name__ for s in STRUCT_SIZES
    }
    enum_constants = set(re.findall(r"^\s+(TPD_[A-Z0-9_]+)\s*=", header, re.MULTILINE))
    enum_constants |= set(re.findall(r"#define (TPD_CAPABILITY_\w+)", header))
    assert enum_constants == {f"{p}{m.name}" for enum, p in ENUM_PREFIXES.items() for m in enum}
    table = re.search(r"typedef struct TPD_Api \{(.*?)\} TPD_Api;", header, re.DOTALL).group(1)
    assert re.findall(r"\(\*(\w+)\)", table) == [name for name, _, _ in API_MEMBERS]

    program = _compile(cc, _layout_program(), tmp_path / "layout", include_dir)
    output = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    c = dict(line.rsplit(" ", 1) for line in output.splitlines())
    python: dict[str, str] = {}
    for struct in STRUCTS:
        name = struct.__name__
        python[f"sizeof {name}"] = str(ctypes.sizeof(struct))
        for field, *_ in struct._fields_:
            python[f"offset {name}.{field}"] = str(getattr(struct, field).offset)
            python[f"size {name}.{field}"] = str(getattr(struct, field).size)
        if struct in STRUCT_SIZES:
            python[f"struct_size {name}"] = str(STRUCT_SIZES[struct])
    for enum, prefix in ENUM_PREFIXES.items():
        python.update({f"constant {prefix}{m.name}": str(int(m)) for m in enum})
    python["constant TPD_API_MAJOR"], python["constant TPD_API_MINOR"] = (
        str(API_MAJOR),
        str(API_MINOR),
    )
    python["constant TPD_IPC_HANDLE_SIZE"] = str(IPC_HANDLE_SIZE)
    python["entry_point"] = ENTRY_POINT
    python["host_elf_format"] = KERNEL_FORMAT_HOST_ELF
    mismatches = {key: (value, c.get(key)) for key, value in python.items() if c.get(key) != value}
    assert mismatches == {}, "(bindings, header) differ"
    assert set(c) == set(python)


def _fake_driver(cc: str, include_dir: Path, path: Path, *defines: str) -> Path:
    """A driver library whose every function crashes (or, with -DHANG, never returns), and
    whose version is MAJOR.3 (-DMAJOR=2 for a driver of the next major version)."""
    casts = "\n".join(
        f"  api.{name} = ({'TPD_Error*' if error else 'void'} (*)({args.__name__}*))broken;"
        for name, args, error in API_MEMBERS
    )
    source = f"""
#include <stddef.h>
#include <unistd.h>
#include "torchplug/driver.h"
#ifndef MAJOR
#define MAJOR TPD_API_MAJOR
#endif
static TPD_Error* broken(void* args) {{
#ifdef HANG
  for (;;) pause();
#endif
  *(volatile int*)args = *(volatile int*)0;
  return NULL;
}}
static TPD_Api api = {{TPD_Api_STRUCT_SIZE, NULL, {{MAJOR, 3}}, "fake", "0"}};
const TPD_Api* TPD_GetApi(void) {{
{casts}
  return &api;
}}
"""
    return _compile(cc, source, path, include_dir, "-shared", "-fPIC", *defines)


def test_a_library_that_is_no_driver_is_refused() -> None:
    libc = ctypes.util.find_library("c")
    assert libc is not None
    with pytest.raises(DriverLoadError, match=f"does not export {ENTRY_POINT}"):
        load(libc)
    with pytest.raises(DriverLoadError, match=f"does not export {ENTRY_POINT}"):
        run_conformance(libc, checks=["api_table"])


def test_a_driver_of_another_major_version_is_refused(
    cc: str, include_dir: Path, tmp_path: Path
) -> None:
    library = _fake_driver(cc, include_dir, tmp_path / "libmajor2.so", "-DMAJOR=2")
    with pytest.raises(
        DriverLoadError, match=rf"API 2\.3.*API 1\.{API_MINOR}.*major versions must be equal"
    ):
        load(library)


def test_a_crashing_driver_fails_each_check_and_a_hanging_one_times_out(
    cc: str, include_dir: Path, tmp_path: Path
) -> None:
    crashing = _fake_driver(cc, include_dir, tmp_path / "libcrash.so")
    results = run_conformance(crashing, timeout=30)
    assert [result.name for result in results] == list(CHECKS)
    for result in results:
        assert result.status is Status.FAIL
        assert "killed by SIGSEGV" in result.detail, result
    hanging = _fake_driver(cc, include_dir, tmp_path / "libhang.so", "-DHANG")
    [result] = run_conformance(hanging, checks=["device_properties"], timeout=1)
    assert (result.status, result.detail) == (Status.FAIL, "timed out after 1 s")


def test_importing_the_suite_imports_no_torch() -> None:
    code = "import sys, torchplug_testing.driver.__main__; sys.exit('torch' in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def _conformance(file_name: str, tmp_path: Path) -> tuple[dict[str, dict], int]:
    """The whole suite against a bundled driver, in a process where torch cannot be
    imported: a vendor runs it without torch."""
    library = _find(f"drivers/{file_name}")
    if library is None:
        pytest.skip(f"{file_name} is not built (looked in {_torchplug_directories()})")
    poisoned = tmp_path / "poisoned"
    (poisoned / "torch").mkdir(parents=True)
    (poisoned / "torch/__init__.py").write_text(
        "raise ImportError('the driver suite imported torch')\n"
    )
    path = [str(poisoned), *filter(None, [os.environ.get("PYTHONPATH")])]
    run = subprocess.run(
        [sys.executable, "-m", "torchplug_testing.driver", str(library), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        timeout=300,
        check=False,
    )
    assert run.returncode in (0, 1), run.stderr
    results = {entry["name"]: entry for entry in json.loads(run.stdout)}
    assert list(results) == list(CHECKS)
    failed = {name: entry["detail"] for name, entry in results.items() if entry["status"] == "FAIL"}
    assert failed == {}
    return results, run.returncode


def _skipped(results: dict[str, dict]) -> set[str]:
    return {name for name, entry in results.items() if entry["status"] == "SKIP"}


def test_the_simulator_driver_conforms(tmp_path: Path) -> None:
    results, returncode = _conformance("libtorchplug_simulator.so", tmp_path)
    # The simulator has every capability and extension.
    assert _skipped(results) == set()
    assert returncode == 0


def test_the_remote_driver_conforms(tmp_path: Path) -> None:
    """The remote driver (device memory in its device process) passes every check but
    those of what it does not offer: host-addressable memory, IPC, graph capture, the
    simulator's controls."""
    results, returncode = _conformance("libtorchplug_remote.so", tmp_path)
    assert _skipped(results) == {
        "graph_capture",
        "graph_capture_errors",
        "host_addressable_memory",
        "ipc_extension",
        "ipc_errors",
        "simulator_kernel_faults",
        "simulator_stats_adopt_sleep",
        "simulator_strict_memory",
    }
    assert returncode == 0
