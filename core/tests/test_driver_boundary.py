"""The core reaches devices only through the driver interface (torchplug/driver.h).

``_C`` contains no simulator: it links no runtime and finds the simulator's
driver library at run time. A backend names its driver; a driver that cannot
be loaded, speaks another major version, fails to initialise or lacks
host-addressable memory fails that backend with a clear reason (``torchplug
doctor``, first use), and never breaks ``import torch``.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torchplug

HERE = Path(__file__).resolve().parent


def _native(name: str) -> Path:
    """The file of the native module torchplug.``name`` built for the running torch."""
    from torchplug import torch_builds

    spec = importlib.machinery.PathFinder.find_spec(name, [str(torch_builds.build_folder())])
    assert spec is not None, f"torchplug.{name} is not installed"
    assert spec.origin is not None, f"torchplug.{name} is not installed"
    assert spec.origin.endswith(".so"), spec.origin
    return Path(spec.origin)


# Strings only the simulator's runtime (core/csrc/runtime) holds: its strict
# memory's fault report and its allocation failure. In _C they would mean the
# runtime is linked in (it was before the driver layer).
RUNTIME_STRINGS = (
    b"mprotect failed on simulated device memory",
    b"torchplug strict mode: host code read or wrote simulated device memory",
)


def test_the_core_module_contains_no_simulator_runtime() -> None:
    core = _native("_C").read_bytes()
    simulator = Path(torchplug.get_simulator_driver()).read_bytes()
    for text in RUNTIME_STRINGS:
        assert text in simulator, text  # the control: the runtime is in the driver
        assert text not in core, text


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
def test_the_core_modules_symbols_name_no_runtime() -> None:
    listed = subprocess.run(
        ["nm", "-C", str(_native("_C"))], capture_output=True, text=True, check=False
    )
    if "no symbols" in listed.stderr:
        pytest.skip("_C is stripped (a wheel build); its strings are checked instead")
    symbols = listed.stdout
    assert "torchplug::driver::DeviceRuntime" in symbols  # the core's driver layer is there
    for namespace in ("torchplug::runtime::", "torchplug::simulator::"):
        offending = [line for line in symbols.splitlines() if namespace in line]
        assert not offending, offending[:10]


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf (binutils)")
def test_the_core_modules_do_not_link_the_simulator() -> None:
    for name in ("_C", "_distributed"):
        dynamic = subprocess.run(
            ["readelf", "-d", str(_native(name))], capture_output=True, text=True, check=True
        ).stdout
        assert "torchplug_simulator" not in dynamic, name
        assert "torchplug_runtime" not in dynamic, name


def test_the_default_driver_is_the_simulator_beside_the_module() -> None:
    from torchplug import _C

    assert Path(_C.default_driver_path()) == Path(torchplug.get_simulator_driver())
    assert Path(_C.default_driver_path()).is_file()


def test_driver_info_of_an_active_backend(device: str) -> None:
    from torchplug import _C

    info = _C.driver_info(device.split(":")[0])
    assert info["name"] == "torchplug simulator"
    assert info["interface"] == "{}.{}".format(*_C.DRIVER_API_VERSION)
    assert Path(info["library"]) == Path(torchplug.get_simulator_driver())
    assert "host_addressable_memory" in info["capabilities"]
    assert "simulator" in info["extensions"]


def _tiny_driver(tmp_path: Path, *defines: str) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler to build the tiny test driver")
    library = tmp_path / ("libtiny" + "".join(d.split("=")[0].lower() for d in defines) + ".so")
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-fvisibility=hidden",
            f"-I{torchplug.get_include()}",
            *(f"-D{d}" for d in defines),
            str(HERE / "drivers" / "tiny_driver.c"),
            "-o",
            str(library),
        ],
        check=True,
    )
    return library


def _backend_with_driver(driver: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter declares backend "bar" on ``driver``; it prints the status,
    doctor's JSON entry of the driver, and what first use of the device raises."""
    script = textwrap.dedent(
        f"""
        import json
        import torch
        from torchplug import Backend
        from torchplug.doctor import _driver

        backend = Backend(name="bar", distribution="torch_bar", driver={driver!r})
        status = backend.autoload()
        try:
            torch.ones(2, device="bar")
            used = "worked"
        except Exception as error:  # first use raises the recorded cause
            used = f"{{type(error).__name__}}: {{error}}"
        print(json.dumps({{"state": status.state.value, "reason": status.reason,
                          "driver": _driver(backend), "used": used}}))
        """
    )
    # The user chose "bar" for PrivateUse1: it keeps the device name even when it
    # fails, so first use reaches torch.bar and raises the recorded cause.
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "TORCHPLUG_PRIVATEUSE1": "bar"}
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )


def _outcome(completed: subprocess.CompletedProcess[str]) -> dict:
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_a_missing_driver_fails_the_backend_not_import_torch(tmp_path: Path) -> None:
    missing = str(tmp_path / "libnothere.so")
    outcome = _outcome(_backend_with_driver(missing))
    assert outcome["state"] == "failed"
    assert "Cannot load the driver library" in outcome["reason"]
    assert missing in outcome["reason"]
    assert outcome["driver"] == {"library": missing, "loaded": False}
    assert "Cannot load the driver library" in outcome["used"]


@pytest.mark.parametrize(
    ("build_flag", "reasons"),
    [
        ("TINY_MAJOR=2", ["speaks driver interface 2.0", "major versions must match"]),
        (
            "TINY_FAIL_INIT",
            ["tiny test driver", "failed to initialise", "no device found on this machine"],
        ),
    ],
    ids=["another major version", "failing to initialise"],
)
def test_a_refused_driver_fails_the_backend_with_its_reason(
    tmp_path: Path, build_flag: str, reasons: list[str]
) -> None:
    library = str(_tiny_driver(tmp_path, build_flag))
    outcome = _outcome(_backend_with_driver(library))
    assert outcome["state"] == "failed"
    assert library in outcome["reason"]
    for reason in reasons:
        assert reason in outcome["reason"]
        assert reason in outcome["used"]


def test_a_working_driver_from_its_path_backs_a_backend(tmp_path: Path) -> None:
    outcome = _outcome(_backend_with_driver(torchplug.get_simulator_driver()))
    assert outcome["state"] == "active", outcome["reason"]
    assert outcome["used"] == "worked"
    assert outcome["driver"]["loaded"]
    assert outcome["driver"]["name"] == "torchplug simulator"


def test_doctor_shows_each_backends_driver() -> None:
    cli = Path(sys.executable).parent / "torchplug"
    completed = subprocess.run(
        [str(cli), "doctor", "--json"], capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    drivers = {entry["device"]: entry["driver"] for entry in report["backends"] if entry["device"]}
    assert drivers["foo"]["loaded"]
    assert drivers["foo"]["name"] == "torchplug simulator"
    assert drivers["foo"]["interface"] == "1.2"
    assert "host_addressable_memory" in drivers["foo"]["capabilities"]
    text = subprocess.run(
        [str(cli), "doctor"], capture_output=True, text=True, timeout=300, check=False
    ).stdout
    assert "drivers:" in text
    assert "torchplug simulator" in text
    assert "(interface 1.2)" in text


def _template_driver(tmp_path: Path) -> Path:
    """The driver of ``torchplug new --driver`` for device "bar": a whole driver, without
    the IPC extension."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler to build the template driver")
    template = Path(torchplug.__file__).parent / "scaffold/templates/driver/driver.c.tmpl"
    source = tmp_path / "driver.c"
    source.write_text(template.read_text().replace("__NAME__", "bar"))
    library = tmp_path / "libbar_driver.so"
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-fvisibility=hidden",
            "-D_GNU_SOURCE",
            f"-I{torchplug.get_include()}",
            str(source),
            "-o",
            str(library),
            "-lpthread",
        ],
        check=True,
    )
    return library


def test_sharing_on_a_driver_without_ipc_names_the_driver_and_the_extension(
    tmp_path: Path,
) -> None:
    library = str(_template_driver(tmp_path))
    script = textwrap.dedent(
        f"""
        import torch
        from multiprocessing.reduction import ForkingPickler
        from torchplug import Backend

        status = Backend(name="bar", distribution="torch_bar", driver={library!r}).autoload()
        assert status.state.value == "active", status.reason
        tensor = torch.ones(3, device="bar")
        try:
            ForkingPickler.dumps(tensor)
        except RuntimeError as error:
            print(error)
        else:
            raise SystemExit("a tensor of a driver without IPC was pickled for another process")
        print("still usable:", tensor.sum().item())
        """
    )
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "TORCHPLUG_PRIVATEUSE1": "bar"}
    completed = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    message = completed.stdout
    assert "Cannot share 'bar' device memory between processes" in message
    assert library in message
    assert "offers no IPC extension (TPD_EXTENSION_IPC" in message
    assert "still usable: 3.0" in message
