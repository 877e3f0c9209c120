"""The bundled drivers, libtorchplug_simulator.so and libtorchplug_remote.so (with its device
process, torchplug-device): installed in torchplug/drivers/, linked to neither torch nor Python,
exporting TPD_GetApi alone, and usable through ctypes in a process that never imports torch.
(The driver interface's full conformance suite is torchplug-testing's.)"""

import platform
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torchplug

# The symbol versions manylinux_2_28 allows at most (tools/release.py tags the core's
# wheel manylinux_2_28; these are auditwheel's limits for it).
MANYLINUX_LIMITS = {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 24), "CXXABI": (1, 3, 11), "GCC": (4, 8, 0)}


# The binaries torchplug installs in torchplug/drivers/: the two drivers and the
# remote driver's device process.
BUNDLED = {
    "simulator": lambda: Path(torchplug.get_simulator_driver()),
    "remote": lambda: Path(torchplug.get_remote_driver()),
    "device-process": lambda: Path(torchplug.get_remote_driver()).with_name("torchplug-device"),
}


def _bundled(name: str) -> Path:
    path = BUNDLED[name]()
    assert path.is_file(), f"{path} is missing: rebuild the core with `uv sync --locked`"
    return path


@pytest.fixture(scope="module", params=["simulator", "remote"])
def library(request: pytest.FixtureRequest) -> Path:
    return _bundled(request.param)


@pytest.fixture(scope="module", params=list(BUNDLED))
def binary(request: pytest.FixtureRequest) -> Path:
    return _bundled(request.param)


def tool_output(*command: str | Path) -> str:
    if shutil.which(str(command[0])) is None:
        pytest.fail(f"{command[0]} (binutils) is needed to inspect the driver library")
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def test_links_neither_torch_nor_python(binary: Path) -> None:
    needed = re.findall(
        r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", tool_output("readelf", "-d", binary)
    )
    assert needed, "readelf found no NEEDED entries"
    linked = [name for name in needed if name.startswith(("libtorch", "libc10", "libpython"))]
    assert not linked, f"the driver links {linked}"


def test_exports_only_the_entry_point(library: Path) -> None:
    symbols = []
    for line in tool_output("nm", "-D", "--defined-only", library).splitlines():
        kind, name = line.split()[-2:]
        # Version definitions (type A) and versioned runtime symbols are not the driver's own.
        if kind != "A" and "@" not in name:
            symbols.append(name)
    assert symbols == ["TPD_GetApi"]


@pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the wheels pin manylinux symbol versions on x86-64 only"
)
def test_symbol_versions_are_manylinux(binary: Path) -> None:
    versions = set(
        re.findall(
            r"\b(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)\b", tool_output("readelf", "-V", binary)
        )
    )
    too_new = sorted(
        f"{name}_{number}"
        for name, number in versions
        if tuple(int(part) for part in number.split(".")) > MANYLINUX_LIMITS[name]
    )
    assert not too_new, (
        f"the driver needs symbol versions newer than manylinux_2_28 allows: {too_new}"
    )


# Runs in a fresh interpreter that never imports torch. Declares only what it calls; the
# structs follow torchplug/driver.h (API 1.2) member by member.
SMOKE_TEST = textwrap.dedent(
    """
    import ctypes, sys
    from ctypes import POINTER, Structure, c_char_p, c_int, c_size_t, c_void_p

    def args(*fields):
        class Args(Structure):
            _fields_ = [("struct_size", c_size_t), *fields]
        def make(**values):
            made = Args(**values)
            made.struct_size = ctypes.sizeof(Args)
            return made
        return make

    Function = ctypes.CFUNCTYPE(c_void_p, c_void_p)  # TPD_Error* (*)(Args*)
    class Api(Structure):
        _fields_ = [
            ("struct_size", c_size_t), ("extension_start", c_void_p),
            ("major", c_int), ("minor", c_int), ("driver_name", c_char_p), ("driver_version", c_char_p),
        ] + [(name, Function) for name in (
            "error_destroy error_message error_get_code client_create client_destroy "
            "client_device_count device_get_properties memory_allocate memory_free memory_get_info "
            "host_memory_allocate host_memory_free memory_set_async memory_copy_async stream_create "
            "stream_destroy stream_query stream_synchronize stream_wait_event "
            "stream_launch_host_function event_create event_destroy event_record event_query "
            "event_synchronize event_elapsed_time stream_wait_idle").split()]

    ErrorMessage = args(("error", c_void_p), ("message", c_char_p), ("message_size", c_size_t))
    ErrorDestroy = args(("error", c_void_p))
    ErrorCode = args(("error", c_void_p), ("code", c_int))
    INVALID_HANDLE = 3
    ClientCreate = args(("name", c_char_p), ("options", c_char_p), ("client", c_void_p))
    ClientDestroy = args(("client", c_void_p))
    DeviceCount = args(("client", c_void_p), ("device_count", c_int))
    Allocate = args(("client", c_void_p), ("device", c_int), ("size", c_size_t), ("pointer", c_void_p))
    Free = args(("client", c_void_p), ("pointer", c_void_p))
    StreamCreate = args(("client", c_void_p), ("device", c_int), ("priority", c_int), ("stream", c_void_p))
    StreamDestroy = args(("client", c_void_p), ("stream", c_void_p))
    StreamQuery = args(("client", c_void_p), ("stream", c_void_p), ("idle", c_int), ("failed", c_int))
    Copy = args(("client", c_void_p), ("stream", c_void_p), ("destination", c_void_p),
                ("source", c_void_p), ("size", c_size_t), ("kind", c_int))
    HOST_TO_DEVICE, DEVICE_TO_HOST = 0, 1

    library = ctypes.CDLL(sys.argv[1])
    library.TPD_GetApi.restype = POINTER(Api)
    api = library.TPD_GetApi().contents

    class DriverError(Exception):
        pass

    def call(name, arguments):
        error = getattr(api, name)(ctypes.addressof(arguments))
        if error:
            code, message = ErrorCode(error=error), ErrorMessage(error=error)
            assert not api.error_get_code(ctypes.addressof(code))
            api.error_message(ctypes.addressof(message))
            failure = DriverError(code.code, f"{name}: {message.message.decode()}")
            api.error_destroy(ctypes.addressof(ErrorDestroy(error=error)))
            raise failure
        return arguments

    assert (api.major, api.minor) == (1, 2), (api.major, api.minor)
    assert api.struct_size == ctypes.sizeof(Api), (api.struct_size, ctypes.sizeof(Api))
    client = call("client_create", ClientCreate(name=b"sim-test")).client
    count = call("client_device_count", DeviceCount(client=client)).device_count
    assert count >= 1, count
    stream = call("stream_create", StreamCreate(client=client, device=0)).stream
    payload = b"torchplug driver"
    device = call("memory_allocate", Allocate(client=client, device=0, size=len(payload))).pointer
    source, result = ctypes.create_string_buffer(payload), ctypes.create_string_buffer(len(payload))
    host_in, host_out = ctypes.addressof(source), ctypes.addressof(result)
    for destination, origin, kind in ((device, host_in, HOST_TO_DEVICE), (host_out, device, DEVICE_TO_HOST)):
        call("memory_copy_async", Copy(client=client, stream=stream, destination=destination,
                                       source=origin, size=len(payload), kind=kind))
    call("stream_synchronize", StreamQuery(client=client, stream=stream))
    assert result.raw == payload, result.raw
    call("memory_free", Free(client=client, pointer=device))
    try:
        call("memory_free", Free(client=client, pointer=device))
    except DriverError as error:
        assert error.args[0] == INVALID_HANDLE, error
    else:
        raise AssertionError("freeing device memory twice succeeded")
    call("stream_destroy", StreamDestroy(client=client, stream=stream))
    call("client_destroy", ClientDestroy(client=client))
    assert "torch" not in sys.modules
    print(f"ok: {api.driver_name.decode()} {api.driver_version.decode()}, {count} devices")
    """
)


def test_ctypes_round_trip_without_torch(library: Path) -> None:
    # -I: no user site, no PYTHON* variables, no script directory; nothing imports torch.
    result = subprocess.run(
        [sys.executable, "-I", "-c", SMOKE_TEST, str(library)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(("ok: torchplug simulator ", "ok: torchplug remote ")), (
        result.stdout
    )
