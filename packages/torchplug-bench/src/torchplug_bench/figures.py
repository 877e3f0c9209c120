"""What every benchmark reports: a figure against a baseline measured in the
same run, and how to measure both (interleaved rounds, medians)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Figure:
    name: str
    baseline: str
    baseline_value: float
    value: float
    unit: str
    ratio: float
    target: str
    met: bool


def step_time_figure(
    name: str, times: dict[str, float], device: str, target: float = 1.10
) -> Figure:
    """A training step's time on `device` against the CPU's, in milliseconds."""
    ratio = times[device] / times["cpu"]
    return Figure(
        name,
        "cpu",
        times["cpu"] * 1e3,
        times[device] * 1e3,
        "ms",
        ratio,
        f"<= {target:.2f}x",
        ratio <= target,
    )


def median_rounds(
    candidates: dict[str, Callable[[], None]], repeat: int, rounds: int
) -> dict[str, float]:
    """Seconds per call of each candidate: rounds interleaved, median of rounds.

    A round ends when the device has run what it was given: kernels are
    queued asynchronously, so the time to launch them is not the time to run them.
    """
    import torch

    def finish() -> None:
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()

    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        for _ in range(max(1, repeat // 10)):
            fn()
    for _ in range(rounds):
        for name, fn in candidates.items():
            started = time.perf_counter()
            for _ in range(repeat):
                fn()
            finish()
            samples[name].append((time.perf_counter() - started) / repeat)
    return {name: statistics.median(values) for name, values in samples.items()}


def render(figures: list[Figure]) -> str:
    rows = [("benchmark", "baseline", "device", "ratio", "target", "met")]
    for f in figures:
        rows.append(
            (
                f.name,
                f"{f.baseline_value:.3g} {f.unit} ({f.baseline})",
                f"{f.value:.3g} {f.unit}",
                f"{f.ratio:.2f}x",
                f.target,
                "yes" if f.met else "NO",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
    )
