"""Clean virtual environments, made and used as a user's shell makes and uses them.

The wheel and release tests (test_wheels.py, test_release.py) install the
built files into new venvs with uv, outside the workspace: no workspace
virtualenv, no uv setting of this session, and bytecode written on first
import. pip compiles bytecode at install; `uv pip install` does not, so with
the suite's PYTHONDONTWRITEBYTECODE (CI images and containers set it) every
child of such a venv would recompile torch's Python (seconds per interpreter).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Building the core inside a test takes minutes on a loaded two-core machine.
COMMAND_TIMEOUT_SECONDS = 1800


def run(*command: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    """The standard output of ``command``; its output in the failure when it fails."""
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        env=env,
        check=False,
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def user_environment(**extra: str) -> dict[str, str]:
    """The environment of a user's shell (plus ``extra``): no workspace
    virtualenv, no uv settings, bytecode written as pip's installs have it."""
    dropped = ("VIRTUAL_ENV", "UV_", "PYTHONDONTWRITEBYTECODE")
    return {k: v for k, v in os.environ.items() if not k.startswith(dropped)} | extra


def clean_venv(path: Path, python: str | Path = sys.executable) -> Path:
    """A new virtual environment at ``path`` for ``python``; returns its interpreter."""
    run(uv(), "venv", "--python", python, path, env=user_environment())
    return path / "bin" / "python"


def uv_install(python: Path, *args: str | Path, cwd: Path = ROOT) -> str:
    """`uv pip install` of ``args`` into the venv of ``python``."""
    return run(uv(), "pip", "install", "--python", python, *args, cwd=cwd, env=user_environment())


def uv() -> str:
    found = shutil.which("uv")
    assert found, "uv is not on PATH: the workspace's tests run under `uv run`"
    return found
