"""Shipping: the release command's files, a real package index, other CPythons and the
out-of-tree plugin that `torchplug new` makes.

The slow tests share one `tools/release.py build` per session (the `release_dist`
fixture of conftest.py). Clean virtual environments get torch the way users do,
from the default index (PyPI), through uv, whose cache holds the wheel that the
workspace installed: the same file, resolved and verified as any install, without
downloading it again.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from user_venv import ROOT, clean_venv, run, user_environment, uv, uv_install

RELEASE = ROOT / "tools" / "release.py"


def load_release_tool():  # -> the tools/release.py module
    spec = importlib.util.spec_from_file_location("release_tool", RELEASE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


release = load_release_tool()


def doctor(bin_dir: Path, cwd: Path, **env: str) -> dict[str, dict]:
    out = run(bin_dir / "torchplug", "doctor", "--json", cwd=cwd, env=user_environment(**env))
    return {b["device"]: b for b in json.loads(out)["backends"]}


def assert_npu_operator_runs(python: Path, cwd: Path) -> None:
    """torch_vnpu's compiled operator, where npu owns PrivateUse1."""
    out = run(
        python, "-c",
        "import torch; print(torch.ops.npu.fast_gelu(torch.zeros(2, device='npu')).tolist())",
        cwd=cwd, env=user_environment(TORCHPLUG_PRIVATEUSE1="npu"),
    )  # fmt: skip
    assert out.strip() == "[0.0, 0.0]"


def assert_discrete_device_runs(python: Path, cwd: Path) -> None:
    """The remote driver, its device process and the core's device kernels, as
    the core's wheel installs them: a device whose memory the host cannot
    address runs a matrix product and a dropout inside its device process."""
    script = (
        "import torch\n"
        "from torchplug import Backend, get_remote_driver\n"
        "status = Backend(name='dsc', driver=get_remote_driver()).autoload()\n"
        "assert status.active, status.reason\n"
        "x = torch.tensor([[0.0, 1, 2], [3, 4, 5]], device='dsc')\n"
        "kept = torch.nn.functional.dropout(torch.ones(1000, device='dsc'), 0.5)\n"
        "print((x.t() @ x).sum().item(), 300 < int((kept.cpu() == 0).sum()) < 700,\n"
        "      [row.operator for row in torch.dsc.fallback_report()])\n"
    )
    out = run(
        python, "-c", script, cwd=cwd, env=user_environment(TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    )
    assert out.strip() == "153.0 True []"


def check_report(bin_dir: Path, device: str, selection: str, cwd: Path) -> dict:
    """The JSON report of `torchplug check` on the conformance tests ``selection`` picks."""
    torchplug = bin_dir / "torchplug"
    out = run(
        torchplug, "check", device, "--json", "--", "-k", selection, cwd=cwd, env=user_environment()
    )
    return json.loads(out)


# -- fast checks ------------------------------------------------------------


def test_new_plugin_inherits_the_expectations_every_torchplug_device_shares() -> None:
    """The scaffold's conformance.toml lists what torch_foo (the core's kernels
    alone) lists, so a new backend starts from the core's known failures."""
    template = ROOT / "core/src/torchplug/scaffold/templates/src/__PACKAGE__/conformance.toml.tmpl"
    foo = ROOT / "plugins/torch_foo/src/torch_foo/conformance.toml"
    assert tomllib.loads(template.read_text()) == tomllib.loads(foo.read_text())


def test_new_writes_a_complete_project(tmp_path: Path) -> None:
    from torchplug import scaffold

    project = scaffold.create("bar", tmp_path / "torch_bar")
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert files == [
        ".gitignore",
        "CMakeLists.txt",
        "README.md",
        "csrc/module.cpp",
        "csrc/ops.cpp",
        "pyproject.toml",
        "src/torch_bar/__init__.py",
        "src/torch_bar/_ops.py",
        "src/torch_bar/conformance.toml",
        "tests/test_bar.py",
    ]
    for path in project.rglob("*"):
        if path.is_file():
            assert "__NAME__" not in path.read_text()
            assert "__PACKAGE__" not in path.read_text()
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["torchplug.privateuse1"] == {"bar": "torch_bar"}
    assert any(r.startswith("torchplug>=") for r in pyproject["project"]["dependencies"])
    # Built once on torch's stable ABI: every torch the core supports, at build and run time.
    core_torch = next(r for r in metadata.requires("torchplug") if r.startswith("torch<"))
    assert core_torch in pyproject["project"]["dependencies"]
    assert core_torch in pyproject["build-system"]["requires"]
    with pytest.raises(ValueError, match="already exists"):
        scaffold.create("bar", project)
    with_driver = scaffold.create("bar", tmp_path / "with_driver", driver=True)
    added = {str(p.relative_to(with_driver)) for p in with_driver.rglob("*") if p.is_file()}
    assert added - set(files) == {"driver/CMakeLists.txt", "driver/driver.c"}
    assert "add_subdirectory(driver)" in (with_driver / "CMakeLists.txt").read_text()
    assert "add_subdirectory" not in (project / "CMakeLists.txt").read_text()
    assert "driver=" in (with_driver / "src/torch_bar/__init__.py").read_text()
    assert "__DRIVER" not in "".join(p.read_text() for p in with_driver.rglob("*") if p.is_file())
    with pytest.raises(ValueError, match="lower-case Python identifier"):
        scaffold.create("Bar-2", tmp_path / "other")


def test_version_command_sets_every_distribution_and_opens_the_changelog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for relative in [
        "pyproject.toml",
        "CHANGELOG.md",
        "core/src/torchplug/__init__.py",
        *(f"{d.path}/pyproject.toml" for d in release.DISTRIBUTIONS),
    ]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    monkeypatch.setattr(release, "ROOT", tmp_path)
    monkeypatch.setattr(release, "CHANGELOG", tmp_path / "CHANGELOG.md")
    release.set_version("0.2.0")
    for dist in release.DISTRIBUTIONS:
        project = tomllib.loads((tmp_path / dist.path / "pyproject.toml").read_text())
        assert project["project"]["version"] == "0.2.0"
        pins = [r for r in project["project"]["dependencies"] if r.startswith("torchplug")]
        assert pins in ([], ["torchplug>=0.2.0,<0.3"]), dist.name
    assert '__version__ = "0.2.0"' in (tmp_path / "core/src/torchplug/__init__.py").read_text()
    changelog = (tmp_path / "CHANGELOG.md").read_text()
    unreleased, released = changelog.split("## 0.2.0 (", 1)
    assert "## Unreleased" in unreleased
    for dist in release.DISTRIBUTIONS:
        assert f"### {dist.name}\n" in released.split("## 0.1.0")[0]


def test_the_supported_torch_releases_are_the_core_requirements_range() -> None:
    requirement = tomllib.loads((ROOT / "core/pyproject.toml").read_text())["project"]
    assert "torch>=2.14,<2.16" in requirement["dependencies"]
    assert release.supported_torch_releases() == ["2.14", "2.15"]


def fake_core_wheel(path: Path, releases: list[str], extra: str | None = None) -> Path:
    """A wheel laid out as the core's: shared files, a build folder per release, metadata."""
    files = {"torchplug/__init__.py": b"", "torchplug/drivers/libdriver.so": b"driver"}
    for torch_release in releases:
        files[f"torchplug/torch-{torch_release}/_C.so"] = f"core for {torch_release}".encode()
    if extra:
        files[extra] = b""
    files["torchplug-0.1.0.dist-info/METADATA"] = b"Name: torchplug\n"
    files["torchplug-0.1.0.dist-info/RECORD"] = b""
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_a_torch_build_merges_into_the_core_wheel_with_its_record(tmp_path: Path) -> None:
    import base64
    import hashlib

    wheel = fake_core_wheel(tmp_path / "base.whl", ["2.15"])
    release.merge_torch_build(wheel, fake_core_wheel(tmp_path / "old.whl", ["2.14"]))
    assert release.torch_builds_in(wheel) == {"2.14", "2.15"}
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record = archive.read("torchplug-0.1.0.dist-info/RECORD").decode().splitlines()
        assert archive.read("torchplug/torch-2.14/_C.so") == b"core for 2.14"
        contents = {name: archive.read(name) for name in names}
    # The metadata stays last; every other file is recorded with its hash and size.
    assert names[-2:] == ["torchplug-0.1.0.dist-info/METADATA", "torchplug-0.1.0.dist-info/RECORD"]
    assert record[-1] == "torchplug-0.1.0.dist-info/RECORD,,"
    for line in record[:-1]:
        name, digest, size = line.split(",")
        data = contents[name]
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert (digest, int(size)) == (f"sha256={expected}", len(data)), name
    assert {line.split(",")[0] for line in record} == set(names)


def test_builds_that_differ_outside_their_torch_folders_are_not_merged(tmp_path: Path) -> None:
    wheel = fake_core_wheel(tmp_path / "base.whl", ["2.15"])
    other = fake_core_wheel(tmp_path / "old.whl", ["2.14"], extra="torchplug/stray.py")
    with pytest.raises(SystemExit, match=r"differ outside their torch builds.*stray\.py"):
        release.merge_torch_build(wheel, other)


# -- the release build -------------------------------------------------------


@pytest.mark.slow
def test_release_files_are_publishable(release_dist: Path) -> None:
    names = [p.name for p in release.release_files(release_dist)]
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    # name-version-python-abi of the wheels, the names of the sdists
    assert {"-".join(n.split("-")[:4]) if n.endswith(".whl") else n for n in names} == {
        f"torchplug-0.1.0-{python}-{python}",
        "torch_vnpu-0.1.0-cp311-abi3",
        "torch_foo-0.1.0-py3-none",
        "vhabana_frameworks-0.1.0-py3-none",
        "torchplug_testing-0.1.0-py3-none",
        "torchplug_bench-0.1.0-py3-none",
        "torchplug-0.1.0.tar.gz",
        "torch_vnpu-0.1.0.tar.gz",
        "torch_foo-0.1.0.tar.gz",
        "vhabana_frameworks-0.1.0.tar.gz",
        "torchplug_testing-0.1.0.tar.gz",
        "torchplug_bench-0.1.0.tar.gz",
    }
    for name in names:
        assert name.endswith((".tar.gz", "-py3-none-any.whl", "manylinux_2_28_x86_64.whl")), name
    # The check the release command ends with: twine --strict, no torch library
    # inside, RUNPATH into torch/lib.
    release.check(release_dist)
    core = next(release_dist.glob(f"torchplug-*-{python}-*.whl"))
    with zipfile.ZipFile(core) as archive:
        metadata = archive.read("torchplug-0.1.0.dist-info/METADATA").decode()
        assert not [n for n in archive.namelist() if ".libs/" in n]  # nothing grafted
    assert "Requires-Python: >=3.11" in metadata
    assert "Requires-Dist: torch<2.16,>=2.14" in metadata
    # One wheel for every supported torch: a core build per release.
    assert release.torch_builds_in(core) == {"2.14", "2.15"}


@pytest.mark.slow
def test_round_trip_through_a_package_index(release_dist: Path, tmp_path: Path) -> None:
    """Publish every file to a pypiserver on 127.0.0.1 with twine, then install
    only torch_foo from it (torch from PyPI) into a clean venv; then torch_vnpu."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            release.tool("pypi-server"),
            "run",
            "-i",
            "127.0.0.1",
            "-p",
            str(port),
            "-a",
            ".",
            "-P",
            ".",
            "--disable-fallback",
            str(index_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/simple/", timeout=5).close()
                break
            except OSError:
                assert server.poll() is None, "pypiserver exited"
                assert time.monotonic() < deadline, "pypiserver did not answer in 60 s"
                time.sleep(0.5)
        run(
            release.tool("twine"), "upload", "--non-interactive", "--repository-url", f"{url}/",
            "-u", "vendor", "-p", "unused", *release.release_files(release_dist),
        )  # fmt: skip
        assert len(list(index_dir.iterdir())) == len(release.release_files(release_dist))

        python = clean_venv(tmp_path / "venv")
        bin_dir = python.parent
        # The local index first (uv's --index outranks the default one), PyPI for torch.
        index = ("--index", f"{url}/simple")
        uv_install(python, *index, "torch_foo", cwd=tmp_path)
        listed = run(
            uv(), "pip", "list", "--format", "json", "--python", python,
            env=user_environment(),
        )  # fmt: skip
        installed = {package["name"] for package in json.loads(listed)}
        assert {"torch-foo", "torchplug", "torch"} <= installed
        assert not {"torch-vnpu", "torchplug-testing", "vhabana-frameworks"} & installed
        out = run(
            python, "-c", "import torch; print(repr(torch.ones(2, device='foo') * 3))", cwd=tmp_path
        )
        assert out.strip() == "tensor([3., 3.], device='foo:0')"
        assert {d: b["status"] for d, b in doctor(bin_dir, tmp_path).items()} == {"foo": "active"}
        assert_discrete_device_runs(python, tmp_path)

        uv_install(python, *index, "torch_vnpu", cwd=tmp_path)
        backends = doctor(bin_dir, tmp_path)
        # Name order gives foo PrivateUse1; npu says how to take it.
        assert {d: b["status"] for d, b in backends.items()} == {"foo": "active", "npu": "inactive"}
        assert "TORCHPLUG_PRIVATEUSE1=npu" in backends["npu"]["reason"]
        out = run(python, "-c", "import torch; print(torch.ones(2, device='foo').sum().item())")
        assert out.strip() == "2.0"
        assert_npu_operator_runs(python, tmp_path)
    finally:
        server.terminate()
        server.wait(timeout=30)

    # A plugin build that does not match the running torch or core: one message
    # naming both versions, shown by doctor, instead of an undefined symbol.
    build_info = next(
        (tmp_path / "venv").glob("lib/python*/site-packages/torch_vnpu/_build_info.py")
    )
    original = build_info.read_text()
    # (torch_vnpu is built on torch's stable ABI: it runs from the torch it targets on.)
    build_info.write_text(
        original.replace('TORCH_STABLE_ABI = "2.14"', 'TORCH_STABLE_ABI = "2.16"')
    )
    npu = doctor(bin_dir, tmp_path, TORCHPLUG_PRIVATEUSE1="npu")["npu"]
    assert npu["status"] == "failed"
    assert (
        "torch_vnpu was built against torch's stable ABI for torch 2.16 and later, "
        "but torch 2.15.0 is running" in npu["reason"]
    )
    # The same library as if built on torch's C++ API, for another torch minor release.
    build_info.write_text(
        re.sub(r'TORCH_VERSION = "[^"]*"', 'TORCH_VERSION = "2.14.1"', original).replace(
            'TORCH_STABLE_ABI = "2.14"\n', ""
        )
    )
    npu = doctor(bin_dir, tmp_path, TORCHPLUG_PRIVATEUSE1="npu")["npu"]
    assert npu["status"] == "failed"
    assert "torch_vnpu was built for torch 2.14.1 but torch 2.15.0 is running" in npu["reason"]
    build_info.write_text(original.replace("KERNEL_API_VERSION = 3", "KERNEL_API_VERSION = 99"))
    npu = doctor(bin_dir, tmp_path, TORCHPLUG_PRIVATEUSE1="npu")["npu"]
    assert npu["status"] == "failed"
    assert "torch_vnpu was built against torchplug 0.1.0 (kernel API 99)" in npu["reason"]
    assert "torchplug 0.1.0 (kernel API 3) is installed" in npu["reason"]


@pytest.mark.slow
def test_scaffolded_plugin_builds_passes_and_installs_outside_the_workspace(
    release_dist: Path, tmp_path: Path
) -> None:
    """`torchplug new bar --driver` in a directory outside the workspace; the
    project builds with torchplug from a directory of wheels (--find-links),
    installs, passes its own tests and the conformance suite (a sample of it,
    torch.compile included) on its own driver, which passes the driver conformance."""
    assert not tmp_path.is_relative_to(ROOT)
    python = clean_venv(tmp_path / "venv")
    bin_dir = python.parent
    links = ("--find-links", release_dist)
    uv_install(python, *links, "torchplug", "torchplug-testing", "pytest", cwd=tmp_path)
    run(
        bin_dir / "torchplug", "new", "bar", "--driver", "--directory", tmp_path / "torch_bar",
        cwd=tmp_path,
    )  # fmt: skip
    project = tmp_path / "torch_bar"
    run(uv(), "build", *links, "-o", tmp_path / "dist", cwd=project, env=user_environment())
    wheel = next((tmp_path / "dist").glob("torch_bar-0.1.0-cp311-abi3-*.whl"))
    uv_install(python, *links, wheel, cwd=tmp_path)
    out = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=project)
    assert " passed" in out
    assert "failed" not in out
    report = check_report(bin_dir, "bar", "device_type or creation or compile or driver", tmp_path)
    assert report["expectations"] == "torch_bar/conformance.toml"
    assert report["groups"]["device_type"]["passed"] == 4
    assert report["groups"]["creation"]["passed"] > 0
    # The device runs on the project's driver, which passes every driver check it offers.
    driver = report["groups"]["driver"]
    assert driver["passed"] >= 25
    assert driver.get("failed", 0) == 0
    doctor = json.loads(
        run(bin_dir / "torchplug", "doctor", "--json", cwd=tmp_path, env=user_environment())
    )
    (bar,) = [b for b in doctor["backends"] if b["device"] == "bar"]
    assert bar["driver"]["library"].endswith("torch_bar/drivers/libbar_driver.so")
    # torch.compile reaches the vendor's device with no code of the vendor's.
    assert report["groups"]["compile"]["passed"] == 4
    assert report["unexpected_failures"] == []


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_wheels_on_another_cpython(release_dist: Path, tmp_path: Path, version: str) -> None:
    """The core's wheel for `version`, with the abi3 and pure wheels of the
    session's build: the devices, the npu operators and the conformance suite work."""
    interpreter = release.find_python(version)
    if interpreter is None:
        pytest.skip(f"CPython {version} is not installed here (uv python find, pyenv)")
    dist = tmp_path / "dist"
    # The newest torch's build only: the other releases' builds are the same
    # code, checked on the session's CPython (test_torch_releases.py).
    run(
        sys.executable, RELEASE, "build", "--only", "torchplug", "--python", version,
        "--torch", release.supported_torch_releases()[-1], "--out", dist,
    )  # fmt: skip
    tag = f"cp{version.replace('.', '')}"
    core = next(dist.glob(f"torchplug-0.1.0-{tag}-{tag}-*manylinux_2_28_x86_64.whl"))
    python = clean_venv(tmp_path / "venv", interpreter)
    others = [
        next(release_dist.glob(f"{n}-*.whl"))
        for n in ("torch_foo", "torch_vnpu", "torchplug_testing")
    ]
    uv_install(python, core, *others, cwd=tmp_path)
    out = run(
        python, "-c",
        "import sys, torch; print(sys.version_info[:2], torch.ones(2, device='foo').sum().item())",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.strip() == f"({version.replace('.', ', ')}) 2.0"
    assert_npu_operator_runs(python, tmp_path)
    report = check_report(python.parent, "foo", "device_type", tmp_path)
    assert report["groups"]["device_type"]["passed"] == 4
