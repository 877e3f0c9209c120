"""``torchplug bench --only allreduce``: all_reduce across ranks, device against CPU.

:func:`bench_allreduce` starts the ranks, each this module run as a script.
Both candidates run in the same processes and the same process group
(``cpu:gloo,<device>:torchplug``), interleaved round by round: all_reduce
of CPU tensors through Gloo (the baseline) and of device tensors through the
torchplug backend. Rank 0 prints the medians as JSON.

Usage: python -m torchplug_bench.distributed DEVICE RANK WORLD STORE_FILE MIB ROUNDS
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from torchplug_bench.figures import Figure, synchronizer
from torchplug_bench.targets import ALL_REDUCE

if TYPE_CHECKING:
    import torch


def bench_allreduce(device: str, rounds: int) -> Figure:
    """Bus bandwidth of all_reduce of 64 MiB on 2 ranks: device tensors vs CPU tensors over Gloo."""
    mib, world = 64.0, 2
    with tempfile.TemporaryDirectory(prefix="torchplug-bench-") as scratch:
        store = os.path.join(scratch, "store")
        ranks = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "torchplug_bench.distributed",
                    device,
                    str(rank),
                    str(world),
                    store,
                    str(mib),
                    str(rounds),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rank in range(world)
        ]
        outputs = [rank.communicate(timeout=600) for rank in ranks]
    for rank, (process, (_, err)) in enumerate(zip(ranks, outputs, strict=True)):
        if process.returncode != 0:
            raise RuntimeError(f"all_reduce benchmark rank {rank} failed:\n{err}")
    seconds = json.loads(outputs[0][0].strip().splitlines()[-1])
    # Bus bandwidth (as nccl-tests defines it): what each link carries.
    traffic = mib * (1 << 20) * 2 * (world - 1) / world

    def busbw(name: str) -> float:
        return traffic / seconds[name] / 1e9

    return Figure(ALL_REDUCE, busbw("cpu"), busbw(device))


def _seconds_per_all_reduce(tensor: torch.Tensor, repeat: int) -> float:
    """Seconds per all_reduce of ``tensor``, until its device has finished them."""
    import torch.distributed as dist

    finish = synchronizer(str(tensor.device))
    dist.barrier()
    started = time.perf_counter()
    for _ in range(repeat):
        dist.all_reduce(tensor)
    finish()
    return (time.perf_counter() - started) / repeat


def main() -> None:
    import torch
    import torch.distributed as dist

    device, rank, world, store, mib, rounds = sys.argv[1:]
    rank, world, rounds = int(rank), int(world), int(rounds)
    if hasattr(os, "sched_setaffinity"):
        # The parent pins itself to one core for the single-process figures;
        # the ranks of this benchmark spread over the machine like real ones.
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
    dist.init_process_group(
        f"cpu:gloo,{device}:torchplug",
        init_method=f"file://{store}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=120),
    )
    elements = int(float(mib) * (1 << 20)) // 4
    tensors = {
        "cpu": torch.ones(elements, dtype=torch.float32),
        device: torch.ones(elements, dtype=torch.float32, device=device),
    }
    samples: dict[str, list[float]] = {name: [] for name in tensors}
    for tensor in tensors.values():
        dist.all_reduce(tensor)  # connect and warm up
        synchronizer(str(tensor.device))()
    for _ in range(rounds):
        for name, tensor in tensors.items():
            samples[name].append(_seconds_per_all_reduce(tensor, repeat=3))
    if rank == 0:
        sys.stdout.write(
            json.dumps({name: statistics.median(values) for name, values in samples.items()}) + "\n"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
