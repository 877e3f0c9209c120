"""Every figure ``torchplug bench`` reports and its target, in one table.

A figure is one row: a name, the baseline it is measured against in the same
run, a unit and a target on the ratio of the device's value to the
baseline's. The measurements, the command's output and the figures table of
docs/performance.md (``torchplug bench --write-docs``) all take their rows from
here, so a target is stated once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# The ``--only`` names, in the order the rows are reported.
BENCHMARKS = (
    "mlp",
    "tiny",
    "copy",
    "allreduce",
    "import",
    "zoo",
    "graphs",
    "compile",
    "discrete",
    "discrete_zoo",
)


@dataclass(frozen=True)
class Target:
    """A bound on ``value / baseline_value``; ``comparison`` is ``"<="`` or ``">="``,
    or ``""`` for a figure that is reported with no target."""

    comparison: str = ""
    bound: float = 0.0

    def met(self, ratio: float) -> bool:
        if self.comparison == "<=":
            return ratio <= self.bound
        if self.comparison == ">=":
            return ratio >= self.bound
        return True

    def __str__(self) -> str:
        return f"{self.comparison} {self.bound:.2f}x" if self.comparison else "reported"


@dataclass(frozen=True)
class Row:
    benchmark: str  # the ``--only`` name that measures it
    name: str
    baseline: str
    unit: str
    target: Target


def step_time(benchmark: str, name: str, target: Target) -> Row:
    """A training step's time on the device against the same step's on the CPU."""
    return Row(benchmark, name, "cpu", "ms", target)


def copy_rate(benchmark: str, name: str, bound: float) -> Row:
    """A copy's bandwidth against a host memcpy of the same bytes."""
    return Row(benchmark, name, "host memcpy", "GiB/s", Target(">=", bound))


# Step times: the device faster than the CPU where asynchronous launches let
# the host's Python run while the device computes (the eager MLP), as fast
# where the work is the same (a compiled step), or within 10% of it.
MLP_STEP = step_time(
    "mlp", "MLP training step (batch 64, 3 Linear of width 512, SGD)", Target("<=", 0.9)
)
MLP_SANITIZER = Row(
    "mlp", "MLP training step with the stream sanitizer", "sanitizer off", "ms", Target("<=", 3.0)
)
TINY_OP = Row("tiny", "tiny elementwise op (a + b, 4 elements)", "cpu", "us", Target("<=", 1.25))
# An asynchronous launch returns long before its result is ready, as on CUDA.
MATMUL_LAUNCH = Row(
    "tiny",
    "2000x2000 matmul: the launch's return",
    "result ready",
    "ms",
    Target("<=", 0.2),
)
HOST_TO_DEVICE = copy_rate("copy", "host to device copy, 64 MiB pinned", 0.9)
DEVICE_TO_HOST = copy_rate("copy", "device to host copy, 64 MiB pinned", 0.9)
ALL_REDUCE = Row(
    "allreduce",
    "all_reduce 64 MiB float32, 2 ranks (bus bandwidth)",
    "cpu, gloo",
    "GB/s",
    Target(">=", 0.9),
)
IMPORT_ALL_ACTIVE = Row(
    "import", "import torch, all plugins active", "autoload off", "ms", Target("<=", 1.03)
)
IMPORT_ALL_DISABLED = Row(
    "import", "import torch, all plugins disabled", "autoload off", "ms", Target("<=", 1.03)
)
ZOO_STEP_TARGET = Target("<=", 1.10)
# A captured training step: one replay() launches what the eager step
# launched operator by operator, and the device runs it without the host.
GRAPH_HOST_TIME = Row(
    "graphs",
    "gpt2 training step captured (AdamW, capturable): host time per replay",
    "eager step's host time",
    "ms",
    Target("<=", 0.3),
)
GRAPH_STEP = step_time(
    "graphs", "gpt2 training step captured (AdamW, capturable), replayed", Target("<=", 0.7)
)
# A device whose memory the host cannot address (the remote driver's): every
# operator is a launch into the device process and every copy crosses into it.
DISCRETE_TINY_OP = Row(
    "discrete", "discrete device: tiny op (a + b, 4 elements)", "cpu", "us", Target("<=", 5.0)
)
DISCRETE_MLP_STEP = step_time(
    "discrete", "discrete device: MLP training step (as above)", Target("<=", 1.5)
)
DISCRETE_HOST_TO_DEVICE = copy_rate(
    "discrete", "discrete device: host to device, 64 MiB pinned", 0.8
)
DISCRETE_DEVICE_TO_HOST = copy_rate(
    "discrete", "discrete device: device to host, 64 MiB pinned", 0.8
)
# Every operator without a device kernel crosses to the host and back.
DISCRETE_ZOO_STEP_TARGET = Target("<=", 3.0)
# The compiled MLP is the same Inductor kernels on both sides: no slower.
COMPILED_STEP_TARGETS = {"mlp": Target("<=", 1.0), "transformer_lm": Target("<=", 1.10)}
COMPILE_TIME_TARGET = Target("<=", 1.20)


def zoo_step(model: str) -> Row:
    return step_time("zoo", f"{model} training step (AdamW)", ZOO_STEP_TARGET)


def discrete_zoo_step(model: str) -> Row:
    return step_time(
        "discrete_zoo", f"discrete device: {model} training step (AdamW)", DISCRETE_ZOO_STEP_TARGET
    )


def compiled_step(workload: str) -> Row:
    return step_time("compile", f"compiled {workload} step", COMPILED_STEP_TARGETS[workload])


def eager_against_compiled(workload: str) -> Row:
    return Row("compile", f"{workload} step on the device, eager", "compiled", "ms", Target())


def compile_time(workload: str) -> Row:
    return Row("compile", f"compile time {workload}", "cpu", "s", COMPILE_TIME_TARGET)


def planned_rows(only: Iterable[str] = BENCHMARKS) -> list[Row]:
    """The rows the benchmarks named in ``only`` report, in report order."""
    from torchplug_bench.compile import WORKLOADS
    from torchplug_bench.zoo import MODELS

    selected = set(only)
    by_benchmark = {
        "mlp": [MLP_STEP, MLP_SANITIZER],
        "tiny": [TINY_OP, MATMUL_LAUNCH],
        "copy": [HOST_TO_DEVICE, DEVICE_TO_HOST],
        "allreduce": [ALL_REDUCE],
        "import": [IMPORT_ALL_ACTIVE, IMPORT_ALL_DISABLED],
        "zoo": [zoo_step(model.name) for model in MODELS if model.trains],
        "graphs": [GRAPH_HOST_TIME, GRAPH_STEP],
        "compile": [
            row
            for workload in WORKLOADS
            for row in (
                compiled_step(workload),
                eager_against_compiled(workload),
                compile_time(workload),
            )
        ],
        "discrete": [
            DISCRETE_TINY_OP,
            DISCRETE_MLP_STEP,
            DISCRETE_HOST_TO_DEVICE,
            DISCRETE_DEVICE_TO_HOST,
        ],
        "discrete_zoo": [discrete_zoo_step(model.name) for model in MODELS if model.trains],
    }
    return [
        row for benchmark in BENCHMARKS if benchmark in selected for row in by_benchmark[benchmark]
    ]
