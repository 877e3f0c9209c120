"""Fixtures of the workspace tests."""

from pathlib import Path

import pytest

from fresh_interpreter import PluginDir


@pytest.fixture
def plugin_dir(tmp_path: Path) -> PluginDir:
    root = tmp_path / "site"
    root.mkdir()
    return PluginDir(root)


@pytest.fixture(scope="session")
def release_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files of `tools/release.py build` for the running CPython, built once
    per test session and shared by the xdist workers (under a file lock)."""
    import os
    import subprocess
    import sys

    from filelock import FileLock

    if os.environ.get("TORCHPLUG_RELEASE_DIST"):  # a build to reuse, made by the same command
        return Path(os.environ["TORCHPLUG_RELEASE_DIST"])
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's directory, above each worker's
    out = root / "release-dist"
    with FileLock(f"{out}.lock"):
        done = out / ".built"
        if not done.exists():
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            release = Path(__file__).resolve().parents[1] / "tools" / "release.py"
            result = subprocess.run(
                [sys.executable, str(release), "build", "--out", str(out), "--python", version],
                capture_output=True,
                text=True,
                timeout=3600,
                check=False,
            )
            assert result.returncode == 0, (
                f"release build failed:\n{result.stdout}\n{result.stderr}"
            )
            done.touch()
    return out
