"""Runs workspace scenarios in a fresh interpreter, optionally beside fake installed plugins.

A module of its own rather than conftest.py: pytest keeps only the last imported
conftest under that module name, so `from conftest import ...` would find
whichever test directory was collected last.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from torchplug_testing import child
from torchplug_testing.child import child_environment


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
        entry_points = {"torch.backends": {distribution: f"torchplug:plugin.{distribution}"}}
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
    """``code`` in a fresh interpreter that sees none of this process's torchplug settings."""
    environment = child_environment(drop=("TORCHPLUG_", "TORCH_DEVICE_BACKEND_AUTOLOAD"), **env)
    if plugins is not None:
        environment["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(plugins.root), environment.get("PYTHONPATH", "")) if p
        )
    return child.run_python(code, environment, timeout=timeout)


class ChildReports:
    """Runs ``module.main(ARGUMENTS, report_path)``, ``module`` one of tests/, in a fresh
    interpreter once per PrivateUse1 owner, on first use, and keeps what it reported:
    the JSON it wrote ({} if none) and its output."""

    def __init__(self, module: str, scratch: Path, timeout: float) -> None:
        self.module = module
        self.scratch = scratch
        self.timeout = timeout
        self._reports: dict[str, tuple[dict[str, Any], str]] = {}

    def entry(self, privateuse1: str, arguments: str, key: str, setup: str = "", **env: str) -> Any:
        """The report's ``key``; fails the test, with the child's output, if it has none."""
        report, output = self.of(privateuse1, arguments, setup, **env)
        if key not in report:
            pytest.fail(
                f"the {self.module} child process with TORCHPLUG_PRIVATEUSE1={privateuse1} "
                f"did not report {key}:\n{output}"
            )
        return report[key]

    def of(
        self, privateuse1: str, arguments: str, setup: str = "", **env: str
    ) -> tuple[dict[str, Any], str]:
        """``setup``: a module of tests/ the child imports first (one that declares a device)."""
        if privateuse1 not in self._reports:
            report = self.scratch / f"{self.module}-{privateuse1}.json"
            code = f"""
                import sys
                from pathlib import Path

                sys.path.insert(0, {str(Path(__file__).parent)!r})
                {f"import {setup}" if setup else ""}
                import {self.module}

                {self.module}.main({arguments}, Path({str(report)!r}))
            """
            result = run_python(
                code, timeout=self.timeout, TORCHPLUG_PRIVATEUSE1=privateuse1, **env
            )
            output = f"(exit code {result.returncode})\n{result.stderr[-6000:]}"
            self._reports[privateuse1] = (
                json.loads(report.read_text()) if report.exists() else {},
                output,
            )
        return self._reports[privateuse1]


@dataclass(frozen=True)
class ModelRun:
    """One child interpreter of the real-model tests: the devices it checks, those
    of them that train, and the PrivateUse1 backend it activates (through
    autoload, or by importing the ``setup`` module of tests/ with autoload off)."""

    devices: list[str]
    train_on: list[str]
    privateuse1: str
    setup: str = ""


# foo with hpu beside it, then npu, which needs PrivateUse1 to itself.
MODEL_RUNS = (
    ModelRun(["foo", "hpu"], train_on=["foo"], privateuse1="foo"),
    ModelRun(["npu"], train_on=["npu"], privateuse1="npu"),
)
# dsc on the remote driver (discrete_backend.py): memory the host cannot address.
DISCRETE_MODEL_RUN = ModelRun(
    ["dsc"], train_on=["dsc"], privateuse1="dsc", setup="discrete_backend"
)


def model_report(
    children: ChildReports, model: str, device: str, train_on: set[str] | None = None
) -> Any:
    """What the child run that checks `device` reported for `model`; the child
    module's ``main(devices, train_on, output)`` gets the run's devices, and
    those of them that train (``train_on`` narrows the run's)."""
    run = next(run for run in (*MODEL_RUNS, DISCRETE_MODEL_RUN) if device in run.devices)
    training = [name for name in run.train_on if train_on is None or name in train_on]
    return children.entry(
        run.privateuse1,
        f"{run.devices!r}, set({training!r})",
        model,
        run.setup,
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        **({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"} if run.setup else {}),
    )
