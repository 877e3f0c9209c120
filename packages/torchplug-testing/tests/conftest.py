"""Helpers for tests that run the conformance suite in a child pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


class SuiteRun:
    def __init__(self, result: subprocess.CompletedProcess[str], report: dict[str, Any] | None):
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
        (tmp_path / "pytest.ini").write_text("[pytest]\n")
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith(("TORCHPLUG_", "PYTEST_"))
        }
        environment.update(env or {})
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-c",
                str(tmp_path / "pytest.ini"),
                "--rootdir",
                str(tmp_path),
                "-p",
                "no:cacheprovider",
                "--conformance-report",
                str(report),
                *args,
            ],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return SuiteRun(result, json.loads(report.read_text()) if report.is_file() else None)

    return run
