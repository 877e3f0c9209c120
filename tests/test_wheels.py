"""The end user's path: built wheels installed with pip-like tooling into a clean venv."""

import json
from pathlib import Path

import pytest

from user_venv import clean_venv, run, user_environment, uv_install

pytestmark = pytest.mark.slow


def venv_with(root: Path, *wheels: Path) -> Path:
    """A new virtual environment under `root` with only `wheels` (and what they
    require) installed; returns its bin directory."""
    python = clean_venv(root / "venv")
    uv_install(python, *wheels)
    return python.parent


def python_lines(bin_dir: Path, code: str, cwd: Path, **env: str) -> list[str]:
    """The lines ``code`` prints, run by the clean venv's interpreter."""
    return run(bin_dir / "python", "-c", code, cwd=cwd, env=user_environment(**env)).splitlines()


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
        # The core's wheel holds a build per supported torch minor release;
        # torch_vnpu, on torch's stable ABI, runs on each of them.
        if wheel.name.startswith(("torchplug-", "torch_vnpu-")):
            assert "Requires-Dist: torch<2.16,>=2.14" in metadata


def test_core_wheel_ships_the_plugin_build_kit(wheels: Path) -> None:
    import zipfile

    with zipfile.ZipFile(next(wheels.glob("torchplug-*.whl"))) as archive:
        names = set(archive.namelist())
    kit = {
        "torchplug/include/torchplug/kernel_scope.h",
        "torchplug/include/torchplug/kernel_api.h",
        "torchplug/include/torchplug/kernel_api_load.h",
        "torchplug/include/torchplug/stable/kernel_scope.h",
        "torchplug/cmake/torchplugConfig.cmake",
        "torchplug/cmake/check_stable_abi.cmake",
        "torchplug/cmake/manylinux_compat.h",
    }
    assert kit <= names, f"the core wheel lacks {sorted(kit - names)}"


@pytest.fixture(scope="module")
def every_wheel(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv with every published wheel installed, as a user installs them
    side by side (its bin directory)."""
    return venv_with(tmp_path_factory.mktemp("every-wheel"), *wheels.glob("*.whl"))


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
    every_wheel: Path, tmp_path: Path, env: dict[str, str], code: str, printed: list[str]
) -> None:
    assert python_lines(every_wheel, code, tmp_path, **env) == printed


def test_clean_venv_install_doctor_reports_active_backends(
    every_wheel: Path, tmp_path: Path
) -> None:
    doctor = run(
        every_wheel / "torchplug", "doctor", "--json", cwd=tmp_path, env=user_environment()
    )
    assert '"status": "active"' in doctor


def test_conformance_suite_runs_against_an_installed_backend(wheels: Path, tmp_path: Path) -> None:
    backend = [next(wheels.glob(f"{name}-*.whl")) for name in ("torchplug", "torch_foo")]
    suite = next(wheels.glob("torchplug_testing-*.whl"))
    bin_dir = venv_with(tmp_path, *backend, suite)
    env = user_environment()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = run(
        bin_dir / "python",
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
        bin_dir / "torchplug",
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
