"""One conformance run: the device under test, its expectations, and the results."""

from __future__ import annotations

import json
import os
import platform
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from torchplug_testing import EXPECTATIONS_ENV, __version__, expectations, fallback

SUITE_DIR = (Path(__file__).parent / "suite").resolve()
OUTCOMES = ("passed", "failed", "expected_failure", "newly_passing", "skipped")
SWEEP_TITLES = {"opinfo": "OpInfo", "modules": "ModuleInfo"}


class ConformanceSession:
    """pytest hooks of an active conformance run (registered only with ``--device``)."""

    def __init__(self, config: pytest.Config, device: str, expected: expectations.Expectations):
        self.config = config
        self.device = device
        self.expected = expected
        self.full = bool(config.getoption("full"))
        self.outcomes: dict[str, dict[str, Any]] = {}
        # mode -> "op-dtype" -> the sweep's figures (see suite/_sweep.py)
        self.samples: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        # The same for the ModuleInfo sweep: mode -> "module-dtype" -> figures.
        self.module_samples: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        # The fallback reports of the xdist workers (see fallback.py).
        self.worker_fallbacks: list[list[dict[str, Any]] | None] = []

    @classmethod
    def start(cls, config: pytest.Config, device: str) -> ConformanceSession:
        check_device(device)
        device_type = device.split(":")[0]
        path = config.getoption("expectations") or os.environ.get(EXPECTATIONS_ENV)
        try:
            expected = expectations.load(path) if path else expectations.discover(device_type)
        except expectations.ExpectationFileError as error:
            raise pytest.UsageError(str(error)) from error
        global _device_under_test, _sweep_options
        _device_under_test = device_type
        _sweep_options = (parse_dtypes(config.getoption("dtypes")), config.getoption("full"))
        config.stash[DEVICE_KEY] = device_type
        return cls(config, device_type, expected)

    def header(self) -> str:
        import torch

        return (
            f"conformance: device {self.device}, torch {torch.__version__}, "
            f"expectations {self.expected.source or 'none'} ({len(self.expected.entries)} entries)"
        )

    # Collection -----------------------------------------------------------------------------

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Module | None:
        # Suite modules are not named test_*.py, so a project that merely has
        # torchplug-testing installed never collects them.
        if (
            file_path.suffix == ".py"
            and file_path.resolve().parent == SUITE_DIR
            and not file_path.name.startswith("_")
            and not parent.session.isinitpath(file_path)
        ):
            return pytest.Module.from_parent(parent, path=file_path)
        return None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            test_id = conformance_id(item)
            if test_id is None:
                continue
            item.user_properties.append(("conformance_id", test_id))
            entry = self.expected.find(test_id, self.full)
            if entry is not None:
                item.user_properties.append(("expectation", entry.reason))
                item.add_marker(pytest.mark.xfail(reason=entry.reason, strict=False))

    # Results (on the xdist controller, or the only process) --------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        test_id = properties.get("conformance_id") or conformance_id_of(report.nodeid)
        if test_id is None:
            return
        reason = properties.get("expectation")
        outcome = classify(report)
        if outcome == "failed" and "conformance_id" not in properties:
            # Reported by the xdist controller for a worker that crashed (no
            # item-side properties): the expectation file decides here.
            entry = self.expected.find(test_id, self.full)
            if entry is not None:
                outcome, reason = "expected_failure", entry.reason
        record = self.outcomes.setdefault(test_id, {"outcome": None, "reason": reason})
        if outcome is None:
            return
        if record["outcome"] in (None, "passed") or outcome == "failed":
            record["outcome"] = outcome
        if outcome == "failed":
            record["message"] = failure_summary(report)
        if outcome == "skipped" and not hasattr(report, "wasxfail"):
            record["message"] = skip_reason(report)
        for key, value in report.user_properties:
            sweeps = {"opinfo_samples": self.samples, "module_samples": self.module_samples}
            if key in sweeps:
                sweeps[key][value["mode"]][f"{value['op']}-{value['dtype']}"] = {
                    **value,
                    "test": test_id,
                }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """An xdist worker ended: keep its fallback report (none if it crashed)."""
        output = getattr(node, "workeroutput", {})
        self.worker_fallbacks.append(output.get(fallback.WORKER_OUTPUT_KEY))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and Path(report.fspath).resolve().parent == SUITE_DIR:
            self.outcomes[f"{Path(report.fspath).stem}::<collection>"] = {
                "outcome": "failed",
                "reason": None,
                "message": failure_summary(report),
            }

    def report(self) -> dict[str, Any]:
        import torch

        groups: dict[str, Counter[str]] = defaultdict(Counter)
        lists: dict[str, list[dict[str, str]]] = defaultdict(list)
        for test_id, record in sorted(self.outcomes.items()):
            outcome = record["outcome"] or "skipped"
            groups[test_id.split("::")[0]][outcome] += 1
            if outcome != "passed":
                entry = {"test": test_id}
                if record.get("reason"):
                    entry["reason"] = record["reason"]
                if record.get("message"):
                    entry["message"] = record["message"]
                lists[outcome].append(entry)
        seen = list(self.outcomes)
        # With -k/-m a deselected test would look stale: only whole runs judge staleness.
        selected = bool(self.config.option.keyword or self.config.option.markexpr)
        stale = [
            entry.pattern
            for entry in self.expected.applicable(self.full)
            if not selected and not any(entry.matches(test_id) for test_id in seen)
        ]
        crashes = [
            {key: sweep[key] for key in ("test", "mode", "op", "dtype", "crash")}
            for samples in (self.samples, self.module_samples)
            for per_op in samples.values()
            for sweep in per_op.values()
            if sweep["crash"]
        ]
        return {
            "device": self.device,
            "suite_version": __version__,
            "torch_version": torch.__version__,
            "python": platform.python_version(),
            "full": bool(self.config.getoption("full")),
            "dtypes": self.config.getoption("dtypes").split(","),
            "expectations": self.expected.source,
            "groups": {
                name: {outcome: counts[outcome] for outcome in OUTCOMES}
                for name, counts in sorted(groups.items())
            },
            "unexpected_failures": lists["failed"],
            "expected_failures": lists["expected_failure"],
            "newly_passing": lists["newly_passing"],
            "skipped": lists["skipped"],
            "stale_expectations": stale,
            "opinfo": sweep_figures(self.samples),
            "modules": sweep_figures(self.module_samples),
            "crashes": sorted(crashes, key=lambda crash: crash["test"]),
            "fallback": fallback.merge(
                [fallback.of_this_process(self.device), *self.worker_fallbacks]
            ),
        }

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            # An xdist worker: the controller saw every report and writes the file.
            output = fallback.of_this_process(self.device)
            self.config.workeroutput[fallback.WORKER_OUTPUT_KEY] = output
            return
        report = self.report()
        path = self.config.getoption("conformance_report")
        if path:
            write_report(path, report)
        if session.exitstatus == pytest.ExitCode.TESTS_FAILED and not report["unexpected_failures"]:
            # Only listed failures: crashed workers the expectation file names.
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput"):
            return
        report = self.report()
        write = terminalreporter.write_line
        terminalreporter.section(f"conformance of '{self.device}' against the CPU")
        for sweep, what in (("opinfo", "operators"), ("modules", "modules")):
            for mode, figures in report[sweep].items():
                for dtype, by_dtype in figures["dtypes"].items():
                    if by_dtype["samples"]:
                        write(
                            f"{SWEEP_TITLES[sweep]} {mode} {dtype}: {by_dtype['samples_passed']}/"
                            f"{by_dtype['samples']} samples pass "
                            f"({100 * by_dtype['pass_rate']:.1f}%) over {by_dtype['operators']} "
                            f"{what}, {by_dtype['crashes']} crashed"
                        )
        listings = (
            (
                report["crashes"],
                "operator(s)/module(s) crashed the process running them:",
                lambda crash: f"{crash['mode']} {crash['op']} {crash['dtype']}: {crash['crash']}",
            ),
            (
                report["newly_passing"],
                f"expected failure(s) now pass; remove them from {self.expected.source}:",
                lambda entry: entry["test"],
            ),
            (
                report["stale_expectations"],
                "expectation entr(ies) matched no test in this run:",
                str,
            ),
        )
        for entries, heading, describe in listings:
            if entries:
                write(f"{len(entries)} {heading}")
                for entry in entries:
                    write(f"  {describe(entry)}")
        write(f"unexpected failures: {len(report['unexpected_failures'])}")


def write_report(path: str, report: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")


def sweep_figures(samples: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per mode: totals over the sweeps, and per dtype."""
    figures = {}
    for mode, per_op in sorted(samples.items()):
        by_dtype: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for sweep in per_op.values():
            by_dtype[sweep["dtype"]].append(sweep)
        figures[mode] = {
            **sample_figures(list(per_op.values())),
            "dtypes": {dtype: sample_figures(sweeps) for dtype, sweeps in by_dtype.items()},
        }
    return figures


def sample_figures(sweeps: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over operator sweeps: samples the CPU accepts, how many match, crashes."""
    total = sum(sweep["total"] for sweep in sweeps)
    passed = sum(sweep["passed"] for sweep in sweeps)
    return {
        "operators": len(sweeps),
        "samples": total,
        "samples_passed": passed,
        "pass_rate": round(passed / total, 4) if total else None,
        "crashes": sum(1 for sweep in sweeps if sweep["crash"]),
    }


DEVICE_KEY = pytest.StashKey[str]()
_device_under_test: str | None = None


_sweep_options: tuple[list, bool] = ([], False)


def sweep_options() -> tuple[list, bool]:
    """The OpInfo sweep's dtypes of this run, and whether it takes every sample (``--full``)."""
    return _sweep_options


def parse_dtypes(text: str) -> list:
    import torch

    dtypes = []
    for name in filter(None, (part.strip() for part in text.split(","))):
        dtype = getattr(torch, name.removeprefix("torch."), None)
        if not isinstance(dtype, torch.dtype):
            raise pytest.UsageError(f"--dtypes: {name!r} is not a torch dtype (e.g. float32).")
        dtypes.append(dtype)
    return dtypes


def device_under_test() -> str:
    """The device of this run, for suite modules that need it at import (collection) time."""
    if _device_under_test is None:
        raise RuntimeError("no conformance run is active; run pytest with --device NAME")
    return _device_under_test


def check_device(device: str) -> None:
    """Fails the run early, with the fix, when ``device`` cannot be tested."""
    import torch

    try:
        parsed = torch.device(device)
    except RuntimeError as error:
        raise pytest.UsageError(
            f"--device {device!r} is not a device type torch knows ({error}). Install and load "
            "the backend first (for an autoloaded backend: pip install it; otherwise import it "
            "in a conftest.py)."
        ) from error
    if parsed.type == "cpu":
        return
    from torchplug_testing import device_api

    available = device_api.is_available(parsed.type)
    if available is None:
        raise pytest.UsageError(
            f"torch cannot tell whether {parsed.type!r} is available: it is not "
            "torch.accelerator's current accelerator and the backend registered no "
            f"torch.{parsed.type} with is_available() (torch._register_device_module)."
        )
    if not available:
        raise pytest.UsageError(
            f"torch.{parsed.type}.is_available() is False: the backend is installed but "
            "not usable in this process. For torchplug backends run `torchplug doctor` to see why."
        )


def conformance_id(item: pytest.Item) -> str | None:
    """``group::test`` for suite tests (group = suite module), None for anything else."""
    path = Path(str(item.path)).resolve()
    if path.parent != SUITE_DIR:
        return None
    return f"{path.stem}::{item.nodeid.split('::', 1)[1]}"


def conformance_id_of(nodeid: str) -> str | None:
    """The id of a suite test from its node id alone (for reports made without the item)."""
    path, _, rest = nodeid.partition("::")
    parts = Path(path).parts
    if not rest or len(parts) < 3 or parts[-3:-1] != ("torchplug_testing", "suite"):
        return None
    return f"{Path(path).stem}::{rest}"


def classify(report: pytest.TestReport) -> str | None:
    if report.when != "call" and report.passed:
        return None
    if hasattr(report, "wasxfail"):
        return "newly_passing" if report.passed else "expected_failure"
    if report.skipped:
        return "skipped"
    return "failed" if report.failed else "passed"


def failure_summary(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else "failed")[:300]


def skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr)
