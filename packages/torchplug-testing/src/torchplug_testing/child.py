"""Child processes for tests: Python code or a pytest run in a fresh interpreter.

A backend is chosen when torch is imported, so whatever depends on the
environment of that moment (which backend owns PrivateUse1, autoload on or
off, a plugin that fails to load) is tested in a child process. Only the
standard library is imported here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


def child_environment(drop: tuple[str, ...] = (), **env: str) -> dict[str, str]:
    """This process's environment without the variables whose names start with one of
    ``drop``, updated with ``env``."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith(drop)}
    environment.update(env)
    return environment


def run_python(
    code: str,
    env: Mapping[str, str],
    *,
    timeout: float = 180,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` (dedented) in a fresh interpreter with exactly the environment ``env``.

    The code runs from a script file rather than ``-c``, so that processes it
    spawns (multiprocessing, DataLoader workers) can import its ``__main__``.
    """
    with tempfile.TemporaryDirectory(prefix="torchplug-child-") as scratch:
        script = Path(scratch) / "scenario.py"
        script.write_text(textwrap.dedent(code))
        return _run([sys.executable, str(script)], env, cwd, timeout)


@dataclass(frozen=True)
class PytestRun:
    """What a child pytest printed, and how it ended (``returncode`` None: timed out)."""

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timeout: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def status(self) -> str:
        if self.returncode is None:
            return f"timed out after {self.timeout:.0f} s"
        return f"exit code {self.returncode}"


def run_pytest(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: str | os.PathLike[str],
    timeout: float,
) -> PytestRun:
    """``python -m pytest -p no:cacheprovider ARGS`` in a fresh interpreter.

    The cache plugin stays off: a child must not write ``.pytest_cache`` into
    the directory of the run that started it. A child that outlives ``timeout``
    is killed, and what it printed until then is kept.
    """
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    try:
        finished = _run(command, env, cwd, timeout)
    except subprocess.TimeoutExpired as expired:
        return PytestRun(command, None, _text(expired.stdout), _text(expired.stderr), timeout)
    return PytestRun(command, finished.returncode, finished.stdout, finished.stderr, timeout)


def isolated_config(directory: Path) -> list[str]:
    """Arguments that give a child pytest an empty configuration rooted at ``directory``,
    so that the settings of the project it runs in (addopts, testpaths) do not leak in."""
    ini = directory / "pytest.ini"
    ini.write_text("[pytest]\n")
    return ["-c", str(ini), "--rootdir", str(directory)]


def _run(
    command: list[str],
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _text(stream: bytes | str | None) -> str:
    if isinstance(stream, bytes):
        return stream.decode(errors="replace")
    return stream or ""
