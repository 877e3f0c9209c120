"""The fallback report of a conformance run: the operators that ran on the CPU fallback
(``torch.<device>.fallback_report()``, which torchplug backends offer), summed over
every process of the run.

The counts live in the process that ran the operators. The crash guard's worker
hands its report over as it is told to exit (a worker that crashed takes its counts
with it), an xdist worker passes its own and its guard's to the controller through
``workeroutput``, and the controller sums them into the JSON report.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

# The key of an xdist worker's report in its ``workeroutput``.
WORKER_OUTPUT_KEY = "torchplug_fallback_report"
# Rows of the text summary.
TOP_OPERATORS = 10

# The reports of this process's crash-guard workers, handed over as they exited.
_from_guard_workers: list[list[dict[str, Any]] | None] = []


def collect(device: str) -> list[dict[str, Any]] | None:
    """This process's fallback report of ``device`` as JSON rows; None when the backend
    has no ``fallback_report`` (it is not a torchplug backend)."""
    from torchplug_testing import device_api

    report = getattr(device_api.module_of(device), "fallback_report", None)
    if report is None or not device_api.is_available(device):
        return None
    return [
        {"operator": row.operator, "calls": row.calls, "bytes": row.bytes, "seconds": row.seconds}
        for row in report()
    ]


def add_guard_worker_report(report: list[dict[str, Any]] | None) -> None:
    """Keeps the report a crash-guard worker of this process handed over."""
    _from_guard_workers.append(report)


def of_this_process(device: str) -> list[dict[str, Any]] | None:
    """This process's report, with its crash-guard workers'."""
    return merge([collect(device), *_from_guard_workers])


def merge(reports: Iterable[list[dict[str, Any]] | None]) -> list[dict[str, Any]] | None:
    """The reports summed per operator, the most time first; None when none is known."""
    known = [report for report in reports if report is not None]
    if not known:
        return None
    totals: dict[str, dict[str, Any]] = {}
    for report in known:
        for row in report:
            total = totals.setdefault(
                row["operator"],
                {"operator": row["operator"], "calls": 0, "bytes": 0, "seconds": 0.0},
            )
            for field in ("calls", "bytes", "seconds"):
                total[field] += row[field]
    return sorted(totals.values(), key=lambda row: (-row["seconds"], row["operator"]))


def summary_lines(report: Sequence[dict[str, Any]] | None, device: str) -> list[str]:
    """The text summary's lines: the operators that took the most time on the fallback."""
    if report is None:
        return []
    if not report:
        return [f"no operator ran on the CPU fallback of '{device}'"]
    lines = [
        f"operators that ran on the CPU fallback of '{device}' ({len(report)}; "
        f"the {min(TOP_OPERATORS, len(report))} that took the most time):",
        f"  {'ms':>10}  {'calls':>8}  {'MiB':>9}  operator",
    ]
    lines += [
        f"  {row['seconds'] * 1e3:10.2f}  {row['calls']:8d}  {row['bytes'] / 2**20:9.2f}  "
        f"{row['operator']}"
        for row in report[:TOP_OPERATORS]
    ]
    return lines
