"""The core's native modules come in one build per supported torch release
(torchplug/torch-<major>.<minor>/); the running torch's is loaded, and a torch
without one is refused with a message naming both sides."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchplug
from torchplug import torch_builds

RUNNING_RELEASE = ".".join(torch.__version__.split("+")[0].split(".")[:2])


def test_the_running_torchs_build_is_the_one_loaded() -> None:
    from torchplug import _C, _build_info

    folder = torch_builds.build_folder()
    assert folder.name == f"torch-{RUNNING_RELEASE}"
    assert Path(_C.__file__).parent == folder
    assert Path(_build_info.__file__).parent == folder
    assert _build_info.TORCH_VERSION.startswith(RUNNING_RELEASE + ".")
    # One module under its public name: the stub that loaded it is gone.
    assert sys.modules["torchplug._C"] is _C
    assert torchplug._C is _C
    assert _C.__name__ == "torchplug._C"


def test_drivers_and_device_kernels_are_shared_by_every_build() -> None:
    driver = Path(torchplug.get_simulator_driver())
    assert driver.is_file()
    # Beside the build folders, not in one.
    assert driver.parent.parent == torch_builds.build_folder().parent


def make_builds(root: Path, *releases: str) -> None:
    for release in releases:
        (root / f"torch-{release}").mkdir(parents=True)


def test_installed_builds_are_listed_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_builds(tmp_path, "2.9", "2.15", "2.14")
    (tmp_path / "torch-notes.txt").write_text("a file, not a build")
    monkeypatch.setattr(torch_builds, "package_folders", lambda: [tmp_path])
    assert list(torch_builds.installed_builds()) == ["2.9", "2.14", "2.15"]


def test_a_torch_without_a_build_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_builds(tmp_path, "2.14", "2.15")
    monkeypatch.setattr(torch_builds, "package_folders", lambda: [tmp_path])
    monkeypatch.setattr(torch_builds, "running_torch", lambda: "2.16.0")
    with pytest.raises(torchplug.BackendLoadError) as raised:
        torch_builds.build_folder()
    message = str(raised.value)
    assert "has native builds for torch 2.14, 2.15, but torch 2.16.0 is running" in message
    assert "pip install 'torch==2.15.*'" in message
    assert "torchplug release built for torch 2.16" in message


def test_an_install_without_any_build_says_to_reinstall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch_builds, "package_folders", lambda: [tmp_path])
    with pytest.raises(torchplug.BackendLoadError, match="native core is not installed"):
        torch_builds.build_folder()


def test_a_build_folder_missing_a_module_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_builds(tmp_path, RUNNING_RELEASE)
    monkeypatch.setattr(torch_builds, "package_folders", lambda: [tmp_path])
    monkeypatch.delitem(sys.modules, "torchplug._no_such_module", raising=False)
    with pytest.raises(torchplug.BackendLoadError, match=r"torchplug\._no_such_module is missing"):
        torch_builds.load("_no_such_module")
    assert "torchplug._no_such_module" not in sys.modules


# A torch release the install has no build for, as doctor shows it: the
# running torch is made to report 2.99.0 before the backends' entry points run.
OUT_OF_RANGE = """
import json
import torch
torch.__version__ = "2.99.0"
torch._import_device_backends()
from torchplug import doctor
print(json.dumps(doctor.collect().as_dict()))
"""


def test_doctor_names_a_torch_the_install_has_no_build_for() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", OUT_OF_RANGE],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.splitlines()[-1])
    assert report["core_builds"] == [RUNNING_RELEASE]
    assert report["core_build_for_running_torch"] is False
    foo = next(entry for entry in report["backends"] if entry["device"] == "foo")
    assert foo["status"] == "failed", foo
    assert f"has native builds for torch {RUNNING_RELEASE}" in foo["reason"], foo["reason"]
    assert "but torch 2.99.0 is running" in foo["reason"], foo["reason"]
