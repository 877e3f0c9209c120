"""The generated part of docs/performance.md: ``torchplug bench --write-docs PAGE``.

The figures table sits between :data:`BEGIN` and :data:`END`; the command
rewrites it from a full run, and :func:`table_structure` gives what a test
compares with what the command would write: the header and each row's name,
baseline and target, not the measured values.
"""

from __future__ import annotations

from pathlib import Path

from torchplug_bench.report import PINNINGS, Report
from torchplug_bench.targets import planned_rows

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def write_page(page: Path, report: Report, command: str) -> None:
    """Replaces the figures table of ``page`` with ``report``'s."""
    text = page.read_text()
    before, begin, rest = text.partition(BEGIN)
    _, end, after = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"{page} has no {BEGIN} ... {END} block to rewrite")
    page.write_text(f"{before}{BEGIN}\n{report.as_markdown(command)}\n{END}{after}")


def table_structure(text: str) -> list[tuple[str, ...]]:
    """The table between the markers of ``text``: its header, then each row's
    first three cells (name, baseline, target)."""
    _, _, rest = text.partition(BEGIN)
    block, _, _ = rest.partition(END)
    rows = [
        tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
        for line in block.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]
    return rows[:1] + [row[:3] for row in rows[1:]]


def expected_structure() -> list[tuple[str, ...]]:
    """What :func:`write_page` writes after a full run, as :func:`table_structure` reads it."""
    rows = planned_rows()
    unmeasured = Report.from_measurements(rows, 0, {pinning: {} for pinning in PINNINGS})
    return table_structure(f"{BEGIN}\n{unmeasured.as_markdown('')}\n{END}")
