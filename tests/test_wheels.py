"""The end user's path: built wheels installed with pip-like tooling into a clean venv."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def run(*command: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=1200, env=env, check=False
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def clean_venv(root: Path, *wheels: Path) -> tuple[Path, dict[str, str]]:
    """A new virtual environment under `root` with only `wheels` (and what they
    require) installed; returns its bin directory and an environment free of
    the workspace's virtualenv and uv settings."""
    uv = shutil.which("uv")
    venv = root / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_"))}
    run(uv, "venv", "--python", sys.executable, str(venv), env=env)
    python = venv / "bin" / "python"
    run(uv, "pip", "install", "--python", str(python), *map(str, wheels), env=env)
    return venv / "bin", env


def python_lines(bin_dir: Path, code: str, env: dict[str, str], cwd: Path) -> list[str]:
    """The lines ``code`` prints, run by the clean venv's interpreter."""
    return run(str(bin_dir / "python"), "-c", code, cwd=cwd, env=env).splitlines()


@pytest.fixture(scope="module")
def wheels(release_dist: Path) -> Path:
    """What `tools/release.py build` publishes (conftest.py's session build):
    sdists, and wheels built from them in isolated environments."""
    return release_dist


def test_sdists_hold_sources_not_build_outputs(wheels: Path) -> None:
    import tarfile

    with tarfile.open(next(wheels.glob("torchplug-*.tar.gz"))) as archive:
        names = archive.getnames()
    assert any(name.endswith("csrc/runtime/platform.cpp") for name in names)
    assert any(name.endswith("CMakeLists.txt") for name in names)
    assert not any("/build/" in name for name in names)
    with tarfile.open(next(wheels.glob("torch_vnpu-*.tar.gz"))) as archive:
        names = archive.getnames()
    assert any(name.endswith("csrc/fused_loops.cpp") for name in names)
    assert not any("/build/" in name or "/tests/" in name for name in names)


def test_wheels_have_complete_metadata(wheels: Path) -> None:
    import zipfile

    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = archive.read(name).decode()
        for field in (
            "Summary:",
            "License-Expression:",
            "Requires-Python:",
            "Project-URL:",
            "Classifier:",
        ):
            assert field in metadata, f"{wheel.name} lacks {field}"
        if wheel.name.startswith(("torchplug-", "torch_vnpu-")):
            assert "Requires-Dist: torch<2.16,>=2.15.0" in metadata


def test_core_wheel_ships_the_plugin_build_kit(wheels: Path) -> None:
    import zipfile

    with zipfile.ZipFile(next(wheels.glob("torchplug-*.whl"))) as archive:
        names = set(archive.namelist())
    assert "torchplug/include/torchplug/kernel_scope.h" in names
    assert "torchplug/include/torchplug/kernel_api.h" in names
    assert "torchplug/cmake/torchplugConfig.cmake" in names
    assert "torchplug/cmake/manylinux_compat.h" in names


@pytest.fixture(scope="module")
def every_wheel(
    wheels: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    """A clean venv with every published wheel installed, as a user installs them
    side by side (its bin directory and environment)."""
    return clean_venv(tmp_path_factory.mktemp("every-wheel"), *wheels.glob("*.whl"))


@pytest.mark.parametrize(
    ("env", "code", "printed"),
    [
        pytest.param(
            {},
            "import torch; print(torch.foo.is_available()); print(repr(torch.ones(2, device='foo') * 3)); "
            "print(repr(torch.ones(1, device='hpu')))",
            ["True", "tensor([3., 3.], device='foo:0')", "tensor([1.], device='hpu:0')"],
            id="foo-and-hpu-autoload",
        ),
        # torch_vnpu's compiled operators load from the installed wheel, next to torch_foo.
        pytest.param(
            {"TORCHPLUG_PRIVATEUSE1": "npu"},
            "import torch; x = torch.zeros(2, device='npu'); "
            "print(torch.accelerator.current_accelerator(), torch.ops.npu.fast_gelu(x).tolist())",
            ["npu [0.0, 0.0]"],
            id="npu",
        ),
    ],
)
def test_clean_venv_install_runs_every_device(
    every_wheel: tuple[Path, dict[str, str]],
    tmp_path: Path,
    env: dict[str, str],
    code: str,
    printed: list[str],
) -> None:
    bin_dir, venv_env = every_wheel
    assert python_lines(bin_dir, code, {**venv_env, **env}, tmp_path) == printed


def test_clean_venv_install_doctor_reports_active_backends(
    every_wheel: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = every_wheel
    doctor = run(str(bin_dir / "torchplug"), "doctor", "--json", cwd=tmp_path, env=env)
    assert '"status": "active"' in doctor


def test_conformance_suite_runs_against_an_installed_backend(wheels: Path, tmp_path: Path) -> None:
    backend = [next(wheels.glob(f"{name}-*.whl")) for name in ("torchplug", "torch_foo")]
    suite = next(wheels.glob("torchplug_testing-*.whl"))
    bin_dir, env = clean_venv(tmp_path, *backend, suite)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = run(
        str(bin_dir / "python"),
        "-m",
        "pytest",
        "--device",
        "foo",
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        "creation or views",
        "--conformance-report",
        "report.json",
        cwd=tmp_path,
        env=env,
    )
    assert "unexpected failures: 0" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["expectations"] == "torch_foo/conformance.toml"
    assert report["groups"]["creation"]["passed"] > 0
    checked = run(
        str(bin_dir / "torchplug"),
        "check",
        "foo",
        "--json",
        "--",
        "-k",
        "device_type",
        cwd=tmp_path,
        env=env,
    )
    assert json.loads(checked)["groups"]["device_type"]["passed"] == 4
