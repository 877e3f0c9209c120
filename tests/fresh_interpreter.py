"""Runs workspace scenarios in a fresh interpreter, optionally beside fake installed plugins.

A module of its own rather than conftest.py: pytest keeps only the last imported
conftest under that module name, so `from conftest import ...` would find
whichever test directory was collected last.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path


class PluginDir:
    """A directory of fake installed distributions, put on PYTHONPATH for subprocesses."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def add(
        self,
        distribution: str,
        source: str,
        entry_points: dict[str, dict[str, str]],
        requires: tuple[str, ...] = ("torchplug",),
    ) -> None:
        package = self.root / distribution
        package.mkdir()
        (package / "__init__.py").write_text(textwrap.dedent(source))
        info = self.root / f"{distribution}-0.1.0.dist-info"
        info.mkdir()
        requirement_lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n{requirement_lines}"
        )
        groups = "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n"
            for group, items in entry_points.items()
        )
        (info / "entry_points.txt").write_text(groups)

    def add_torchplug_backend(
        self,
        distribution: str,
        name: str,
        setup: str = "None",
        *,
        prepare: str = "None",
        priority: int = 0,
        dispatch_key: str = "privateuse1",
        raise_on_import: str | None = None,
    ) -> None:
        """A plugin built on torchplug whose entry point is torchplug's guarded import.

        ``setup``/``prepare`` name a callable of the plugin (``"_failing_setup"``
        fails as a missing native library does); ``raise_on_import`` is an
        exception expression the plugin's module raises before reaching torchplug.
        """
        prelude = f"raise {raise_on_import}" if raise_on_import else ""
        entry_points = {"torch.backends": {distribution: f"torchplug.loader:plugin.{distribution}"}}
        if dispatch_key == "privateuse1":
            entry_points["torchplug.privateuse1"] = {name: distribution}
        self.add(
            distribution,
            f"""
            {prelude}
            from torchplug import Backend

            def _failing_setup(*module):
                raise OSError("libvendor_runtime.so.3: cannot open shared object file: No such file or directory")

            backend = Backend(
                name={name!r},
                dispatch_key={dispatch_key!r},
                distribution={distribution!r},
                setup={setup},
                prepare={prepare},
                priority={priority},
            )
            _autoload = backend.autoload
            _autoload()
            """,
            entry_points,
        )


def run_python(
    code: str, *, plugins: PluginDir | None = None, timeout: float = 180, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ)
    for name in list(environment):
        if name.startswith(("TORCHPLUG_", "TORCH_DEVICE_BACKEND_AUTOLOAD")):
            del environment[name]
    environment.update(env)
    if plugins is not None:
        environment["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(plugins.root), environment.get("PYTHONPATH", "")) if p
        )
    # A script file rather than -c, so spawned children can import __main__.
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "scenario.py"
        script.write_text(textwrap.dedent(code))
        return subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            env=environment,
            timeout=timeout,
            check=False,
        )
