"""One measuring process of ``torchplug bench``.

The command measures every figure twice, pinned to one core and unpinned,
each time in a fresh interpreter running this module, so that neither
measurement inherits the other's threads (autograd's, the device's kernel
queue) or their CPU affinity. It prints one JSON object: the device, the
conditions, each active backend's activation time and a figure for every row
the selected benchmarks report, failed ones included.

Usage: python -m torchplug_bench.measure --only mlp,tiny --rounds 7 [--device D] [--pin]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

from torchplug_bench.figures import Figure
from torchplug_bench.targets import BENCHMARKS, planned_rows


def pin_to_one_core() -> int | None:
    """Runs this process (and the threads it starts, autograd's device thread
    among them) on one core, so device and CPU get the same single core."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return core


def default_device() -> str:
    """The first active torchplug backend's device."""
    import torchplug

    active = [name for name, status in torchplug.statuses().items() if status.active]
    if not active:
        raise SystemExit("No torchplug backend is active; install one or check `torchplug doctor`.")
    return active[0]


def _measurements(
    benchmark: str, device: str, rounds: int, conditions: dict[str, Any]
) -> list[Callable[[], list[Figure]]]:
    """The independent measurements of one benchmark: one that fails leaves the
    others' figures standing."""
    if benchmark == "mlp":
        from torchplug_bench.micro import bench_mlp, bench_mlp_sanitizer

        return [lambda: [bench_mlp(device, rounds)], lambda: [bench_mlp_sanitizer(device, rounds)]]
    if benchmark == "tiny":
        from torchplug_bench.micro import bench_matmul_launch, bench_tiny_op

        return [
            lambda: [bench_tiny_op(device, rounds)],
            lambda: [bench_matmul_launch(device, rounds)],
        ]
    if benchmark == "copy":
        from torchplug_bench.micro import bench_copies

        return [lambda: bench_copies(device, rounds)]
    if benchmark == "allreduce":
        from torchplug_bench.distributed import bench_allreduce

        return [lambda: [bench_allreduce(device, rounds)]]
    if benchmark == "import":
        from torchplug_bench.micro import bench_import

        def import_figures() -> list[Figure]:
            figures, conditions["backend_load_ms"] = bench_import(rounds)
            return figures

        return [import_figures]
    if benchmark == "zoo":
        from torchplug_bench.zoo import bench_zoo

        return [lambda: bench_zoo(device, rounds)]
    if benchmark == "graphs":
        from torchplug_bench.graphs import bench_graphs

        return [lambda: bench_graphs(device, rounds)]
    if benchmark in ("discrete", "discrete_zoo"):
        from torchplug_bench.discrete import bench_discrete

        return [lambda: bench_discrete(rounds, benchmark)]
    from torchplug_bench.compile import bench_compile

    return [lambda: bench_compile(device, rounds)]


def measure(device: str | None, only: list[str], rounds: int, pin: bool) -> dict[str, Any]:
    """Every row of the benchmarks in ``only``, measured in this process."""
    load_at_start = os.getloadavg()[0]
    # Before torch starts any thread, so that every thread inherits the core.
    core = pin_to_one_core() if pin else None
    import torch

    torch.set_num_threads(1)
    device = device or default_device()
    conditions: dict[str, Any] = {
        "device": device,
        "pinned_core": core,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    figures: list[Figure] = []
    for benchmark in (name for name in BENCHMARKS if name in only):
        errors: list[Exception] = []
        for measurement in _measurements(benchmark, device, rounds, conditions):
            try:
                figures += measurement()
            except Exception as error:
                errors.append(error)
        measured = {figure.row for figure in figures}
        figures += [
            Figure.failed(row, errors[-1] if errors else "not measured")
            for row in planned_rows([benchmark])
            if row not in measured
        ]
    # Other work on the machine moves the figures: the reader sees how much there was.
    conditions["load_average"] = [round(load_at_start, 1), round(os.getloadavg()[0], 1)]
    return {
        **conditions,
        "figures": {figure.row.name: figure.as_json() for figure in figures},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device")
    parser.add_argument("--only", required=True, help="comma-separated benchmarks")
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--pin", action="store_true", help="pin the process to one core")
    args = parser.parse_args()
    result = measure(args.device, args.only.split(","), args.rounds, args.pin)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
