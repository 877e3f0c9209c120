"""What every benchmark reports and how both sides of a ratio are measured.

A :class:`Figure` is one row of :mod:`torchplug_bench.targets` measured once:
the baseline's value and the device's, or why it could not be measured.
:func:`median_rounds` times the two sides alike: interleaved rounds, each side
warmed up and every round ended by synchronising that side's own device.

A ratio is the median of the rounds' own ratios (:func:`paired_ratio`), not
the ratio of the two medians: each round measures both sides back to back, so
what the machine did meanwhile (another process, a frequency change) moves
both, and drift between rounds cancels.
"""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchplug_bench.targets import Row

# Every optimizer is built with this, on the CPU and on the device alike: by
# default torch takes the batched (foreach) path on an accelerator and a
# per-parameter loop on the CPU, and the ratio would compare two implementations.
FOREACH = True


@dataclass
class Figure:
    row: Row
    baseline_value: float | None = None
    value: float | None = None
    error: str | None = None  # why the row was not measured: a failed row
    # The median of the rounds' ratios, where the rounds paired both sides;
    # otherwise the ratio is that of the two values.
    paired: float | None = None
    # A training step's waits of the host for the device, per step:
    # (requested by the model's code, implicit; torchplug.runtime.host_synchronizations).
    host_waits: tuple[float, float] | None = None

    @classmethod
    def failed(cls, row: Row, error: BaseException | str) -> Figure:
        if isinstance(error, BaseException):
            error = "".join(traceback.format_exception_only(error)).strip()
        return cls(row, error=error)

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.baseline_value:
            return None
        if self.paired is not None:
            return self.paired
        return self.value / self.baseline_value

    @property
    def met(self) -> bool:
        return self.ratio is not None and self.row.target.met(self.ratio)

    def as_json(self) -> dict[str, Any]:
        return {
            "baseline_value": self.baseline_value,
            "value": self.value,
            "ratio": self.ratio,
            "paired": self.paired,
            "met": self.met,
            "error": self.error,
            "host_waits": self.host_waits,
        }


@dataclass(frozen=True)
class Candidate:
    """One side of a ratio: a callable and the device whose queued work it leaves."""

    device: str
    run: Callable[[], None]


def synchronizer(device: str) -> Callable[[], None]:
    """Waits for the work queued on ``device``, through that device's own module
    (``torch.hpu.synchronize`` for hpu), never ``torch.accelerator``: the
    current accelerator may be another device."""
    import torch

    if torch.device(device).type == "cpu":
        return lambda: None
    module = torch.get_device_module(device)
    return lambda: module.synchronize(device)


class Rounds(dict[str, float]):
    """Each candidate's median, with every round's value kept for :func:`paired_ratio`."""

    def __init__(self, samples: dict[str, list[float]]) -> None:
        super().__init__({name: statistics.median(values) for name, values in samples.items()})
        self.samples = samples


def paired_ratio(times: Rounds, numerator: str, denominator: str) -> float:
    """The median over rounds of ``numerator / denominator``."""
    pairs = zip(times.samples[numerator], times.samples[denominator], strict=True)
    return statistics.median(top / bottom for top, bottom in pairs)


def median_rounds(candidates: dict[str, Candidate], repeat: int, rounds: int) -> Rounds:
    """Seconds per call of each candidate: rounds interleaved, median of rounds.

    Each candidate warms up and then waits for its device before the first
    timed round, and every round ends when the device has run what it was
    given: kernels are queued asynchronously, so the time to launch them is
    not the time to run them.
    """
    finish = {name: synchronizer(candidate.device) for name, candidate in candidates.items()}
    for name, candidate in candidates.items():
        for _ in range(max(1, repeat // 10)):
            candidate.run()
        finish[name]()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, candidate in candidates.items():
            started = time.perf_counter()
            for _ in range(repeat):
                candidate.run()
            finish[name]()
            samples[name].append((time.perf_counter() - started) / repeat)
    return Rounds(samples)


def step_time_figure(row: Row, times: Rounds, device: str) -> Figure:
    """A step's time on ``device`` against the CPU's, in the row's unit."""
    scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[row.unit]
    return Figure(
        row, times["cpu"] * scale, times[device] * scale, paired=paired_ratio(times, device, "cpu")
    )
