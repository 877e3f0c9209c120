"""Helpers for tests that run the conformance suite in a child pytest."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from torchplug_testing.child import PytestRun, child_environment, isolated_config, run_pytest


class SuiteRun:
    def __init__(self, result: PytestRun, report: dict[str, Any] | None):
        self.result = result
        self.report = report

    def outcome_of(self, test_id: str) -> str:
        for outcome in ("unexpected_failures", "expected_failures", "newly_passing", "skipped"):
            if any(entry["test"] == test_id for entry in self.report[outcome]):
                return outcome
        return "passed"


@pytest.fixture
def run_suite(tmp_path: Path):
    """Runs ``pytest --device ...`` in a fresh interpreter, outside the workspace config."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> SuiteRun:
        report = tmp_path / "report.json"
        environment = child_environment(drop=("TORCHPLUG_", "PYTEST_"), **(env or {}))
        arguments = [*isolated_config(tmp_path), "--conformance-report", str(report), *args]
        result = run_pytest(arguments, environment, cwd=tmp_path, timeout=timeout)
        return SuiteRun(result, json.loads(report.read_text()) if report.is_file() else None)

    return run


@pytest.fixture
def child_plugin(tmp_path: Path):
    """Writes a pytest plugin module that a child run loads with ``-p NAME``; returns
    the environment in which the child finds it."""

    def write(name: str, source: str) -> dict[str, str]:
        directory = tmp_path / "plugins"
        directory.mkdir(exist_ok=True)
        (directory / f"{name}.py").write_text(source)
        return {"PYTHONPATH": os.pathsep.join([str(directory), *sys.path])}

    return write
