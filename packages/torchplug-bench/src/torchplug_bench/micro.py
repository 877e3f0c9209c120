"""The single-process figures: an MLP training step (with and without the stream
sanitizer), a tiny operator, host/device copies and the time of ``import torch``.

Each figure is measured against its baseline in the same run (interleaved
rounds, medians) and from the same work on both sides.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

from torchplug_bench import targets
from torchplug_bench.figures import (
    FOREACH,
    Candidate,
    Figure,
    Rounds,
    median_rounds,
    paired_ratio,
    step_time_figure,
)
from torchplug_bench.targets import Row


def _mlp_step(device: str) -> Candidate:
    import torch

    torch.manual_seed(0)
    # The row's "3 Linear of width 512": two hidden layers with ReLU, then 10 classes.
    hidden = [layer for _ in range(2) for layer in (torch.nn.Linear(512, 512), torch.nn.ReLU())]
    model = torch.nn.Sequential(*hidden, torch.nn.Linear(512, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, foreach=FOREACH)
    inputs = torch.randn(64, 512, device=device)
    labels = torch.randint(0, 10, (64,), device=device)

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()

    return Candidate(device, step)


def bench_mlp(device: str, rounds: int, row: Row = targets.MLP_STEP) -> Figure:
    times = median_rounds(
        {"cpu": _mlp_step("cpu"), device: _mlp_step(device)}, repeat=30, rounds=rounds
    )
    return step_time_figure(row, times, device)


def bench_mlp_sanitizer(device: str, rounds: int) -> Figure:
    """The MLP step with the stream sanitizer on, against the same step without it."""
    from torchplug import sanitizer

    step = _mlp_step(device)

    def sanitized() -> None:
        with sanitizer.enabled():
            step.run()

    times = median_rounds(
        {"off": step, "sanitizer": Candidate(device, sanitized)}, repeat=30, rounds=rounds
    )
    return Figure(
        targets.MLP_SANITIZER,
        times["off"] * 1e3,
        times["sanitizer"] * 1e3,
        paired=paired_ratio(times, "sanitizer", "off"),
    )


def bench_tiny_op(device: str, rounds: int, row: Row = targets.TINY_OP) -> Figure:
    import torch

    a, b = torch.randn(4), torch.randn(4)
    da, db = a.to(device), b.to(device)
    times = median_rounds(
        {"cpu": Candidate("cpu", lambda: a + b), device: Candidate(device, lambda: da + db)},
        repeat=20000,
        rounds=rounds,
    )
    return step_time_figure(row, times, device)


def bench_matmul_launch(device: str, rounds: int, row: Row = targets.MATMUL_LAUNCH) -> Figure:
    """How long a 2000x2000 matmul's launch takes to return, against the time
    until its result is ready (the launch, then a synchronize): the median of
    ``rounds`` rounds each."""
    import statistics
    import time

    import torch

    module = getattr(torch, torch.device(device).type)
    a, b = torch.randn(2000, 2000, device=device), torch.randn(2000, 2000, device=device)
    (a @ b).sum()  # the first call of its signature runs at once: not measured
    module.synchronize()
    launches, readies = [], []
    for _ in range(max(rounds, 3)):
        started = time.perf_counter()
        product = a @ b
        launched = time.perf_counter()
        module.synchronize()
        readies.append(time.perf_counter() - started)
        launches.append(launched - started)
        del product
    launch, ready = statistics.median(launches), statistics.median(readies)
    return Figure(row, ready * 1e3, launch * 1e3)


def bench_copies(
    device: str,
    rounds: int,
    rows: tuple[Row, Row] = (targets.HOST_TO_DEVICE, targets.DEVICE_TO_HOST),
) -> list[Figure]:
    """64 MiB from pinned host memory to the device and back (``rows``: those two
    figures' rows), against a host memcpy of the same bytes."""
    import torch

    size = 64 << 20
    pinned = torch.empty(size, dtype=torch.uint8).pin_memory()
    pinned.fill_(1)
    pinned_back = torch.empty(size, dtype=torch.uint8).pin_memory()
    on_device = torch.empty(size, dtype=torch.uint8, device=device)
    source = (ctypes.c_char * size).from_address(pinned.data_ptr())
    target = (ctypes.c_char * size).from_address(pinned_back.data_ptr())

    def host_memcpy() -> None:
        ctypes.memmove(target, source, size)

    def host_to_device() -> None:
        on_device.copy_(pinned)

    def device_to_host() -> None:
        pinned_back.copy_(on_device)

    times = median_rounds(
        {
            "memcpy": Candidate("cpu", host_memcpy),
            "h2d": Candidate(device, host_to_device),
            "d2h": Candidate(device, device_to_host),
        },
        # Memory bandwidth drifts with whatever else the machine does: short
        # rounds, interleaved, so each candidate meets the same drift.
        repeat=2,
        rounds=rounds * 5,
    )
    gib = size / 2**30
    return [
        Figure(
            row, gib / times["memcpy"], gib / times[key], paired=paired_ratio(times, "memcpy", key)
        )
        for key, row in zip(("h2d", "d2h"), rows, strict=True)
    ]


IMPORTS_PER_ROUND = 3


def _import_time(env: dict[str, str], runs: int) -> list[float]:
    code = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
    out = []
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        out.append(float(result.stdout.strip().splitlines()[-1]))
    return out


def bench_import(rounds: int) -> tuple[list[Figure], dict[str, float]]:
    """``import torch`` with every backend active and with every one disabled, against
    ``import torch`` without autoload; and each active backend's activation time (ms)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPLUG_")}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, torch, torchplug; print(json.dumps({n: s.load_ms if s.active else None for n, s in torchplug.statuses().items()}))",
        ],
        capture_output=True,
        text=True,
        env=base,
        check=True,
    )
    load_ms = json.loads(probe.stdout.strip().splitlines()[-1])
    variants: dict[str, dict[str, str]] = {
        "autoload off": {**base, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        "all active": base,
        "all disabled": {**base, "TORCHPLUG_DISABLE": ",".join(load_ms)},
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    # Warm the file cache, and write the bytecode of sources installed in
    # editable mode (a workspace's), which a wheel's installer compiles as
    # torch's was: like with like even where PYTHONDONTWRITEBYTECODE is set.
    _import_time({k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}, 1)
    # One import moves by several percent from process to process, as much as
    # the difference measured: three interleaved imports of each per round,
    # in an order that rotates, so that no variant always follows the same one.
    names = list(variants)
    for turn in range(rounds * IMPORTS_PER_ROUND):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            samples[name] += _import_time(variants[name], 1)
    times = Rounds(samples)
    figures = [
        Figure(
            row,
            times["autoload off"] * 1e3,
            times[variant] * 1e3,
            paired=paired_ratio(times, variant, "autoload off"),
        )
        for row, variant in (
            (targets.IMPORT_ALL_ACTIVE, "all active"),
            (targets.IMPORT_ALL_DISABLED, "all disabled"),
        )
    ]
    return figures, {name: ms for name, ms in load_ms.items() if ms is not None}
