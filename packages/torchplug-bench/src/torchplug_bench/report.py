"""What ``torchplug bench`` reports: every planned row with its pinned and its
unpinned figure side by side, as a text table, JSON or the Markdown table of
docs/performance.md.

A row that a measurement could not produce (the benchmark raised, a model's
library is missing, the measuring process died) is shown as failed, never
left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from torchplug_bench.figures import Figure
from torchplug_bench.targets import Row

PINNINGS = ("pinned", "unpinned")
# An exception's line in a message or a traceback: "RuntimeError: ...", "torch._dynamo.exc.X: ...".
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Failed): ")


@dataclass
class Report:
    rows: list[Row]
    rounds: int
    # Per pinning, the conditions of its measuring process (device, core, versions...).
    conditions: dict[str, dict[str, Any]]
    figures: dict[str, dict[Row, Figure]]

    @classmethod
    def from_measurements(
        cls, rows: list[Row], rounds: int, measurements: dict[str, dict[str, Any]]
    ) -> Report:
        """``measurements``: per pinning, what the measuring process printed, or
        ``{"error": why}`` when it printed nothing."""
        conditions, figures = {}, {}
        for pinning, measured in measurements.items():
            conditions[pinning] = {k: v for k, v in measured.items() if k != "figures"}
            by_name = measured.get("figures", {})
            figures[pinning] = {
                row: _figure(row, by_name.get(row.name), measured.get("error")) for row in rows
            }
        return cls(rows, rounds, conditions, figures)

    @property
    def pinnings(self) -> list[str]:
        return [pinning for pinning in PINNINGS if pinning in self.figures]

    @property
    def failed(self) -> list[tuple[Row, str, str]]:
        """(row, pinning, error) of every failed figure."""
        return [
            (row, pinning, self.figures[pinning][row].error or "")
            for row in self.rows
            for pinning in self.pinnings
            if self.figures[pinning][row].error is not None
        ]

    def condition(self, key: str) -> Any:
        return next((c[key] for c in self.conditions.values() if c.get(key) is not None), None)

    def as_json(self) -> str:
        return json.dumps(
            {
                "device": self.condition("device"),
                "rounds": self.rounds,
                "conditions": self.conditions,
                "figures": [
                    {
                        "name": row.name,
                        "benchmark": row.benchmark,
                        "baseline": row.baseline,
                        "unit": row.unit,
                        "target": str(row.target),
                        **{p: self.figures[p][row].as_json() for p in self.pinnings},
                    }
                    for row in self.rows
                ],
            },
            indent=2,
        )

    def _table(self, ratio_note: dict[str, str]) -> list[list[str]]:
        header = ["benchmark", "baseline", "target"]
        for pinning in self.pinnings:
            header += [f"device, {pinning}", f"baseline, {pinning}", f"ratio, {pinning}"]
        lines = [header]
        for row in self.rows:
            cells = [row.name, row.baseline, str(row.target)]
            for pinning in self.pinnings:
                cells += _cells(self.figures[pinning][row], ratio_note)
            lines.append(cells)
        return lines

    def _conditions_line(self) -> str:
        templates = (
            ("device", "device {}"),
            ("torch", "torch {}"),
            ("python", "Python {}"),
            ("cpus", "{} cores"),
            ("torch_threads", "{} intra-op thread"),
        )
        facts = [
            template.format(value)
            for key, template in templates
            if (value := self.condition(key)) is not None
        ]
        where = [
            f"pinned to core {self.conditions[p].get('pinned_core')}" if p == "pinned" else p
            for p in self.pinnings
        ]
        loads = [
            "{} to {} {}".format(*self.conditions[p]["load_average"], p)
            for p in self.pinnings
            if self.conditions[p].get("load_average")
        ]
        load = f"; 1-minute load average {', '.join(loads)}" if loads else ""
        return f"{', '.join(facts)}; {' and '.join(where)}; medians of {self.rounds} rounds, ratios the median of the rounds' ratios{load}"

    def _activation_line(self) -> str | None:
        parts = [
            f"{pinning}: " + ", ".join(f"{name} {ms:.1f} ms" for name, ms in load_ms.items())
            for pinning in self.pinnings
            if (load_ms := self.conditions[pinning].get("backend_load_ms"))
        ]
        return (
            "each backend's activation inside import torch, " + "; ".join(parts) if parts else None
        )

    def _host_waits_line(self) -> str | None:
        """The training steps' waits of the host for the device (unpinned, what users get)."""
        figures = self.figures.get("unpinned") or next(iter(self.figures.values()), {})
        counted = [
            f"{figure.row.name.removesuffix(' training step (AdamW)')} "
            f"{figure.host_waits[0]:g}/{figure.host_waits[1]:g}"
            for figure in figures.values()
            if figure.host_waits is not None
        ]
        if not counted:
            return None
        return (
            "host waits per training step (requested by the model's code / implicit, an "
            "operator on the host waiting for queued kernels): " + ", ".join(counted)
        )

    def _failures(self) -> list[tuple[str, str]]:
        """(the row and the pinnings it failed in, the error's summary): one entry
        where both pinnings failed alike."""
        by_row_and_error: dict[tuple[str, str], list[str]] = {}
        for row, pinning, error in self.failed:
            by_row_and_error.setdefault((row.name, _summary(error)), []).append(pinning)
        return [
            (f"{name}, {' and '.join(pinnings)}", error)
            for (name, error), pinnings in by_row_and_error.items()
        ]

    def as_text(self) -> str:
        lines = self._table({"missed": "NO", "failed": "FAILED"})
        widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
        text = [self._conditions_line(), ""]
        text += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
        for line in (self._activation_line(), self._host_waits_line()):
            if line:
                text += ["", line]
        if self.failed:
            text += ["", "failed:"]
            text += [f"  {where}: {error}" for where, error in self._failures()]
        return "\n".join(line.rstrip() for line in text)

    def as_markdown(self, command: str) -> str:
        """The figures table of docs/performance.md, with how it was measured."""
        lines = self._table({"missed": "(missed)", "failed": "failed"})
        text = [f"Measured by `{command}`: {self._conditions_line()}.", ""]
        text.append("| " + " | ".join(lines[0]) + " |")
        text.append("|---|---|---|" + "---:|" * (len(lines[0]) - 3))
        text += ["| " + " | ".join(cells) + " |" for cells in lines[1:]]
        for line in (self._activation_line(), self._host_waits_line()):
            if line:
                text += ["", line[0].upper() + line[1:] + "."]
        if self.failed:
            text += ["", "Failed:", ""]
            text += [f"- {where}: `{error}`" for where, error in self._failures()]
        return "\n".join(text)


def _figure(row: Row, measured: dict[str, Any] | None, run_error: str | None) -> Figure:
    if measured is None:
        return Figure.failed(row, run_error or "not reported by the measuring process")
    return Figure(
        row,
        measured["baseline_value"],
        measured["value"],
        measured["error"],
        measured.get("paired"),
        tuple(waits) if (waits := measured.get("host_waits")) is not None else None,
    )


def _cells(figure: Figure, ratio_note: dict[str, str]) -> list[str]:
    if figure.error is not None or figure.ratio is None:
        return ["", "", ratio_note["failed"]]
    unit = figure.row.unit
    ratio = f"{figure.ratio:.2f}"
    if not figure.met and ratio == f"{figure.row.target.bound:.2f}":
        ratio = f"{figure.ratio:.3f}"  # a miss that two decimals would show as the bound
    ratio += "x" + ("" if figure.met else f" {ratio_note['missed']}")
    return [f"{_number(figure.value)} {unit}", f"{_number(figure.baseline_value)} {unit}", ratio]


def _number(value: float) -> str:
    """Three significant digits, without an exponent for large values."""
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def _summary(error: str, limit: int = 200) -> str:
    """The line that names the error: the innermost ``SomeError: ...`` line of a
    message that quotes others (a child's stderr, a compiler's failure), else its first."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED.match(line)]
    line = raised[-1] if raised else (lines[0] if lines else error)
    return line if len(line) <= limit else line[: limit - 3] + "..."
