"""The figures of a discrete device: one whose memory the host cannot address.

The measuring process of ``torchplug bench`` has its backends active, one of
them owning PrivateUse1, so the discrete device is measured in a process of
its own (this module's ``main``), started without autoload: it declares a
backend on torchplug's remote driver, whose device memory lives in a device
process, and measures the tiny op, the MLP step and the pinned copies against
the CPU and a host memcpy (``discrete``), or the model zoo's training steps
against the CPU's (``discrete_zoo``), as the host-memory rows are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from torchplug_bench import targets
from torchplug_bench.figures import Figure

DEVICE = "tpdiscrete"


def bench_discrete(rounds: int, benchmark: str = "discrete") -> list[Figure]:
    """The rows of ``benchmark`` (``discrete`` or ``discrete_zoo``), measured in a
    child process (this process's CPU affinity)."""
    environment = dict(os.environ)
    environment["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    environment["TORCHPLUG_PRIVATEUSE1"] = DEVICE
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchplug_bench.discrete",
            "--rounds",
            str(rounds),
            "--benchmark",
            benchmark,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise RuntimeError(
            f"the discrete device's measuring process exited with status {completed.returncode}"
        )
    measured = json.loads(lines[-1])
    return [
        Figure(row, **measured[row.name])
        for row in targets.planned_rows([benchmark])
        if row.name in measured
    ]


def measure(rounds: int, benchmark: str) -> dict[str, dict[str, float | str | None]]:
    import torch

    from torchplug import Backend, get_remote_driver

    status = Backend(name=DEVICE, driver=get_remote_driver()).autoload()
    if not status.active:
        raise RuntimeError(f"the discrete device did not activate: {status.reason}")
    torch.set_num_threads(1)
    if benchmark == "discrete_zoo":
        from torchplug_bench.zoo import bench_zoo

        figures = bench_zoo(DEVICE, rounds, row_of=targets.discrete_zoo_step)
    else:
        from torchplug_bench.micro import bench_copies, bench_mlp, bench_tiny_op

        figures = [
            bench_tiny_op(DEVICE, rounds, targets.DISCRETE_TINY_OP),
            bench_mlp(DEVICE, rounds, targets.DISCRETE_MLP_STEP),
            *bench_copies(
                DEVICE, rounds, (targets.DISCRETE_HOST_TO_DEVICE, targets.DISCRETE_DEVICE_TO_HOST)
            ),
        ]
    return {
        figure.row.name: {
            "baseline_value": figure.baseline_value,
            "value": figure.value,
            "error": figure.error,
            "paired": figure.paired,
        }
        for figure in figures
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--benchmark", choices=("discrete", "discrete_zoo"), default="discrete")
    args = parser.parse_args()
    sys.stdout.write(json.dumps(measure(args.rounds, args.benchmark)) + "\n")


if __name__ == "__main__":
    main()
