"""Run a PrivateUse1 backend's tests in a process where that backend owns PrivateUse1.

Only one PrivateUse1 backend can be active per process. In an environment with
two installed (a workspace, a CI image), the one that loses the key cannot run
its tests in the main pytest process. A test directory of a torchplug backend
opts in from its ``conftest.py``::

    from torchplug_testing.owner_process import run_in_owner_process

    pytest_collection_modifyitems = run_in_owner_process("npu", __file__)

When the backend lost PrivateUse1 in the current process, every selected test
of that directory is replaced by a proxy item. On first use of a test file the
proxies run that file's selected tests once, in a child
``python -m pytest ... -p no:cacheprovider`` with ``TORCHPLUG_PRIVATEUSE1=<name>``,
and each proxy reports its own test's outcome (passed, failed with the child's
report, skipped, xfailed). A child that crashes fails every test it did not
report. Where the backend already owns PrivateUse1 (including the child
itself), the tests run in place, untouched.

The backend's state comes from torchplug's activation record: torchplug is imported when
the hook runs (it is installed wherever a torchplug backend is), not with this
module, so the rest of torchplug-testing serves backends not built on torchplug.
"""

from __future__ import annotations

import os
import re
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from torchplug_testing.child import child_environment, run_pytest

# torchplug.settings.PRIVATEUSE1: the variable that gives PrivateUse1 to a backend.
PRIVATEUSE1_ENV = "TORCHPLUG_PRIVATEUSE1"
CHILD_TIMEOUT_SECONDS = 1800.0
_OUTPUT_TAIL_CHARS = 6000

ModifyItemsHook = Callable[[pytest.Session, pytest.Config, list[pytest.Item]], None]


@dataclass(frozen=True)
class ChildOutcome:
    outcome: str  # "passed", "failed", "skipped" or "xfailed"
    details: str = ""


class ChildTestFailure(Exception):
    """A test failed (or was never run) in the child process; carries its report."""


def run_in_owner_process(device: str, conftest_file: str | os.PathLike[str]) -> ModifyItemsHook:
    """A ``pytest_collection_modifyitems`` hook for the directory of ``conftest_file``.

    Runs after selection (``-k``, ``-m``, deselection), so the child gets
    exactly the tests the user selected.
    """
    directory = Path(conftest_file).resolve().parent

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        reason = _reason_to_reroute(device)
        if reason is None:
            return
        runs: dict[Path, _ChildRun] = {}
        for index, item in enumerate(items):
            path = Path(item.path).resolve()
            if not path.is_relative_to(directory):
                continue
            run = runs.get(path)
            if run is None:
                run = runs[path] = _ChildRun(config, device, reason)
            run.nodeids.append(item.nodeid)
            items[index] = ChildProcessItem.from_parent(
                item.parent, name=item.name, child_run=run, original=item
            )

    return pytest_collection_modifyitems


def _reason_to_reroute(device: str) -> str | None:
    """Why this process cannot run ``device``'s tests, or None if it can."""
    import torchplug
    from torchplug import settings
    from torchplug.backend import BackendState

    if settings.current().privateuse1 == device:
        return None  # already asked for it: run in place (never recurse)
    import torch  # noqa: F401 - activates the installed backends

    status = torchplug.statuses().get(device)
    if status is None or status.state is not BackendState.LOST_PRIVATEUSE1:
        return None
    return status.reason


class _ChildRun:
    """The child pytest run of one test file, started by the first of its tests."""

    def __init__(self, config: pytest.Config, device: str, reason: str) -> None:
        self.config = config
        self.device = device
        self.reason = reason
        self.nodeids: list[str] = []
        self._outcomes: dict[tuple[str, str], ChildOutcome] | None = None
        self._output = ""

    def outcome_of(self, nodeid: str) -> ChildOutcome:
        if self._outcomes is None:
            self._outcomes = self._run()
        outcome = self._outcomes.get(_junit_address(nodeid))
        if outcome is None:
            return ChildOutcome(
                "failed",
                f"The child process with {PRIVATEUSE1_ENV}={self.device} did not report "
                f"this test.\n{self._output}",
            )
        return outcome

    def _run(self) -> dict[tuple[str, str], ChildOutcome]:
        rootdir = Path(self.config.rootpath)
        environment = child_environment(drop=("PYTEST_XDIST", "PYTEST_CURRENT_TEST"))
        environment[PRIVATEUSE1_ENV] = self.device
        with tempfile.TemporaryDirectory(prefix="torchplug-child-") as scratch:
            report = Path(scratch) / "report.xml"
            arguments = [*self.nodeids, f"--rootdir={rootdir}", f"--junitxml={report}"]
            arguments += ["-o", "junit_logging=no", "-q", "-rN"]
            if self.config.inipath is not None:
                arguments.append(f"--config-file={self.config.inipath}")
            if self.config.pluginmanager.hasplugin("xdist"):
                arguments += ["-n", "0"]  # the child is one worker's share already
            run = run_pytest(arguments, environment, cwd=rootdir, timeout=CHILD_TIMEOUT_SECONDS)
            self._output = (
                f"child: {' '.join(run.command)}\n({run.status}; {PRIVATEUSE1_ENV}={self.device})\n"
                f"...{run.output[-_OUTPUT_TAIL_CHARS:]}"
            )
            return _read_junit(report) if report.exists() else {}


def _junit_address(nodeid: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit report gives the test ``nodeid``."""
    path, bracket, parameters = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + parameters
    return ".".join(names[:-1]), names[-1]


def _read_junit(report: Path) -> dict[tuple[str, str], ChildOutcome]:
    """Outcomes by (classname, name), as ``_junit_address`` computes them."""
    outcomes: dict[tuple[str, str], ChildOutcome] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        address = (case.get("classname", ""), case.get("name", ""))
        problems = [element for element in case if element.tag in ("failure", "error")]
        skipped = case.find("skipped")
        if problems:
            details = "\n".join(
                f"{element.get('message', '')}\n{element.text or ''}" for element in problems
            )
            outcome = ChildOutcome("failed", details)
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            outcome = ChildOutcome("xfailed", skipped.get("message", ""))
        elif skipped is not None:
            outcome = ChildOutcome("skipped", skipped.get("message", ""))
        else:
            outcome = ChildOutcome("passed")
        outcomes[address] = outcome
    return outcomes


class ChildProcessItem(pytest.Item):
    """Stands for one test that runs in the child process of its file."""

    def __init__(self, *, child_run: _ChildRun, original: pytest.Item, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.child_run = child_run
        self.original = original

    def runtest(self) -> None:
        self.add_report_section(
            "call",
            "reroute",
            f"Ran in a child process with {PRIVATEUSE1_ENV}={self.child_run.device}: "
            f"{self.child_run.reason}",
        )
        result = self.child_run.outcome_of(self.nodeid)
        if result.outcome == "failed":
            raise ChildTestFailure(result.details)
        if result.outcome == "skipped":
            pytest.skip(result.details)
        if result.outcome == "xfailed":
            pytest.xfail(result.details)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, ChildTestFailure):
            return f"[in a child process with {PRIVATEUSE1_ENV}={self.child_run.device}]\n{excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.original.reportinfo()[0], None, self.name
