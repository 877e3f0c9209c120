"""``torchplug check DEVICE``: the conformance suite in a child pytest, summarised.

The child gets its own interpreter (a backend that must own PrivateUse1 can be
selected through its environment alone), its own pytest configuration (the
caller's project settings do not leak in) and xdist workers (a crash outside
the OpInfo sweeps, which have their own crash guard, takes down one worker,
not the run).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torchplug_testing import fallback
from torchplug_testing.child import child_environment, isolated_config, run_pytest

log = logging.getLogger(__name__)

COLUMNS = (
    ("passed", "pass"),
    ("failed", "FAIL"),
    ("expected_failure", "expected fail"),
    ("newly_passing", "newly passing"),
    ("skipped", "skip"),
)
DEFAULT_TIMEOUT_S = 3600.0


class CheckError(RuntimeError):
    """The child run produced no report (it could not start, crashed or timed out)."""


def run_suite(
    device: str,
    *,
    full: bool = False,
    expectations: str | None = None,
    workers: int | None = None,
    extra_env: Mapping[str, str] | None = None,
    pytest_args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """Runs the suite for ``device`` in a child process and returns its JSON report."""
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    with tempfile.TemporaryDirectory(prefix="torchplug-check-") as scratch:
        directory = Path(scratch)
        report_path = directory / "report.json"
        arguments = [*isolated_config(directory), "-q", "--tb=line", "-n", str(workers)]
        arguments += ["--max-worker-restart", "1000", "--device", device]
        arguments += ["--conformance-report", str(report_path)]
        if full:
            arguments.append("--full")
        if expectations:
            arguments += ["--expectations", str(Path(expectations).resolve())]
        arguments += list(pytest_args)
        environment = child_environment(**(extra_env or {}))
        log.info("running pytest %s", " ".join(arguments))
        finished = run_pytest(arguments, environment, cwd=directory, timeout=timeout)
        if finished.returncode is None:
            raise CheckError(
                f"the conformance run for '{device}' did not finish within {timeout:.0f} s; "
                "rerun with a larger --timeout, or narrow it with pytest arguments after --"
            )
        if not report_path.is_file():
            tail = "\n".join(finished.output.strip().splitlines()[-25:])
            raise CheckError(
                f"the conformance run for '{device}' produced no report "
                f"(pytest exit {finished.returncode}):\n{tail}"
            )
        report = json.loads(report_path.read_text())
    report["pytest_exit_code"] = finished.returncode
    return report


def failure_causes(report: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Expected failures grouped by their reason, most frequent first."""
    return Counter(entry["reason"] for entry in report["expected_failures"]).most_common()


def text_summary(report: Mapping[str, Any]) -> str:
    header = ("group", *(title for _, title in COLUMNS))
    rows = [
        (group, *(str(counts[key]) for key, _ in COLUMNS))
        for group, counts in report["groups"].items()
    ]
    totals = ("total", *(str(sum(c[key] for c in report["groups"].values())) for key, _ in COLUMNS))
    widths = [max(len(row[i]) for row in (header, *rows, totals)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))

    out = [
        f"conformance of '{report['device']}' against the CPU "
        f"(torch {report['torch_version']}, {'full' if report['full'] else 'sampled'} OpInfo sweep, "
        f"expectations: {report['expectations'] or 'none'})",
        line(header),
        line(["-" * width for width in widths]),
        *(line(row) for row in rows),
        line(totals),
    ]
    out += opinfo_lines(report)
    if report["crashes"]:
        out.append(f"operators and modules that crashed the process ({len(report['crashes'])}):")
        out += [f"  {crash['test']}: {crash['crash']}" for crash in report["crashes"]]
    if report["unexpected_failures"]:
        out.append(f"unexpected failures ({len(report['unexpected_failures'])}):")
        out += [f"  {e['test']}: {e.get('message', '')}" for e in report["unexpected_failures"]]
    if report["newly_passing"]:
        out.append(
            f"newly passing ({len(report['newly_passing'])}); remove from {report['expectations']}:"
        )
        out += [f"  {entry['test']}" for entry in report["newly_passing"]]
    causes = failure_causes(report)
    if causes:
        out.append("expected failures by cause:")
        out += [f"  {count:4d}  {reason}" for reason, count in causes]
    if report["stale_expectations"]:
        out.append("expectation entries that matched no test:")
        out += [f"  {pattern}" for pattern in report["stale_expectations"]]
    out += fallback.summary_lines(report.get("fallback"), report["device"])
    verdict = "FAILED" if report["unexpected_failures"] else "OK"
    out.append(f"{verdict}: {len(report['unexpected_failures'])} unexpected failure(s)")
    return "\n".join(out)


def describe_samples(figures: Mapping[str, Any], sweep: str = "opinfo") -> str:
    if not figures["samples"]:
        return "no samples"
    return (
        f"{figures['samples_passed']}/{figures['samples']} samples pass "
        f"({100 * figures['pass_rate']:.1f}%), {figures['operators']} "
        f"{'modules' if sweep == 'modules' else 'operators'}, "
        f"{figures['crashes']} crashed"
    )


def opinfo_lines(report: Mapping[str, Any], bullet: str = "") -> list[str]:
    """The OpInfo and ModuleInfo figures of each mode, in total and per dtype (indented
    under it); ``bullet`` starts each line (Markdown's ``- `` makes a nested list)."""
    lines = []
    for sweep, title in (("opinfo", "OpInfo"), ("modules", "ModuleInfo")):
        for mode, figures in report.get(sweep, {}).items():
            lines.append(f"{bullet}{title} {mode}: {describe_samples(figures, sweep)}")
            lines += [
                f"  {bullet}{dtype}: {describe_samples(by_dtype, sweep)}"
                for dtype, by_dtype in figures["dtypes"].items()
            ]
    return lines


def markdown_report(report: Mapping[str, Any]) -> str:
    out = [
        f"# Conformance of `{report['device']}`",
        "",
        f"torch {report['torch_version']}, torchplug-testing {report['suite_version']}, "
        f"{'full' if report['full'] else 'sampled'} OpInfo sweep over "
        f"{', '.join(report['dtypes'])}; expectations: `{report['expectations'] or 'none'}`.",
        "",
        "| group | " + " | ".join(title for _, title in COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for group, counts in report["groups"].items():
        out.append(f"| {group} | " + " | ".join(str(counts[key]) for key, _ in COLUMNS) + " |")
    out.append("")
    out += opinfo_lines(report, bullet="- ")
    sections = (
        ("Operators and modules that crashed the process", report["crashes"], "crash"),
        ("Unexpected failures", report["unexpected_failures"], "message"),
        ("Newly passing (remove from the expectation file)", report["newly_passing"], "reason"),
    )
    for title, entries, detail in sections:
        if entries:
            out += ["", f"## {title}", ""]
            out += [f"- `{entry['test']}`: {entry.get(detail, '')}" for entry in entries]
    causes = failure_causes(report)
    if causes:
        out += ["", "## Expected failures by cause", "", "| tests | reason |", "|---:|---|"]
        out += [f"| {count} | {reason} |" for reason, count in causes]
    if report.get("fallback"):
        out += [
            "",
            "## Operators on the CPU fallback",
            "",
            "| ms | calls | bytes | operator |",
        ]
        out += ["|---:|---:|---:|---|"]
        out += [
            f"| {row['seconds'] * 1e3:.2f} | {row['calls']} | {row['bytes']} | `{row['operator']}` |"
            for row in report["fallback"][: fallback.TOP_OPERATORS]
        ]
    return "\n".join(out) + "\n"


def show(report: dict[str, Any], *, as_json: bool = False, markdown: str | None = None) -> int:
    """Prints ``report`` (text or JSON), optionally writes it as Markdown; the exit status."""
    sys.stdout.write((json.dumps(report, indent=2) if as_json else text_summary(report)) + "\n")
    if markdown:
        Path(markdown).write_text(markdown_report(report))
    return 1 if report["unexpected_failures"] else 0
