"""``torchplug bench``: the project's speed targets, measured side by side.

Every figure is a ratio measured in one run against a baseline measured in
the same run (interleaved rounds, medians), so machine load affects both.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


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


def step_time_figure(name: str, times: dict[str, float], device: str, target: float = 1.10) -> Figure:
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
    """Seconds per call of each candidate: rounds interleaved, median of rounds."""
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        for _ in range(max(1, repeat // 10)):
            fn()
    for _ in range(rounds):
        for name, fn in candidates.items():
            started = time.perf_counter()
            for _ in range(repeat):
                fn()
            samples[name].append((time.perf_counter() - started) / repeat)
    return {name: statistics.median(values) for name, values in samples.items()}


def _mlp_step(device: str) -> Callable[[], None]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(64, 512, device=device)
    targets = torch.randint(0, 10, (64,), device=device)

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()

    return step


def bench_mlp(device: str, rounds: int) -> Figure:
    times = median_rounds(
        {"cpu": _mlp_step("cpu"), device: _mlp_step(device)}, repeat=30, rounds=rounds
    )
    return step_time_figure("MLP training step (64x512, 3 Linear, SGD)", times, device)


def bench_tiny_op(device: str, rounds: int) -> Figure:
    import torch

    a, b = torch.randn(4), torch.randn(4)
    da, db = a.to(device), b.to(device)
    times = median_rounds(
        {"cpu": lambda: a + b, device: lambda: da + db}, repeat=20000, rounds=rounds
    )
    ratio = times[device] / times["cpu"]
    return Figure(
        "tiny elementwise op (a + b, 4 elements)",
        "cpu",
        times["cpu"] * 1e6,
        times[device] * 1e6,
        "us",
        ratio,
        "<= 1.5x",
        ratio <= 1.5,
    )


def bench_copies(device: str, rounds: int) -> list[Figure]:
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
        {"memcpy": host_memcpy, "h2d": host_to_device, "d2h": device_to_host},
        repeat=5,
        rounds=rounds,
    )
    gib = size / 2**30
    figures = []
    for key, label in (("h2d", "host to device"), ("d2h", "device to host")):
        share = times["memcpy"] / times[key]
        figures.append(
            Figure(
                f"{label} copy, 64 MiB pinned",
                "host memcpy",
                gib / times["memcpy"],
                gib / times[key],
                "GiB/s",
                share,
                ">= 0.80x",
                share >= 0.80,
            )
        )
    return figures


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
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPLUG_")}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, torch; from torchplug import loader; print(json.dumps({n: s.load_ms for n, s in loader.statuses().items()}))",
        ],
        capture_output=True,
        text=True,
        env=base,
        check=True,
    )
    per_backend = json.loads(probe.stdout.strip().splitlines()[-1])
    variants = {
        "autoload off": {**base, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        "all plugins": base,
        "all disabled": {**base, "TORCHPLUG_DISABLE": ",".join(per_backend)},
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    _import_time(base, 1)  # warm the file cache
    for _ in range(rounds):
        for name, env in variants.items():
            samples[name] += _import_time(env, 1)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    off = medians["autoload off"]
    figures = [
        Figure(
            f"import torch, {name}",
            "autoload off",
            off * 1e3,
            medians[name] * 1e3,
            "ms",
            medians[name] / off,
            "<= 1.06x",
            medians[name] / off <= 1.06,
        )
        for name in ("all plugins", "all disabled")
    ]
    return figures, per_backend


def bench_allreduce(device: str, rounds: int, mib: float = 64.0, world: int = 2) -> Figure:
    """Bus bandwidth of all_reduce on `world` ranks: device tensors vs CPU tensors over Gloo."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="torchplug-bench-") as scratch:
        store = os.path.join(scratch, "store")
        ranks = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "torchplug.distributed_bench",
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

    ratio = busbw(device) / busbw("cpu")
    return Figure(
        f"all_reduce {mib:g} MiB float32, {world} ranks (bus bandwidth)",
        "cpu, gloo",
        busbw("cpu"),
        busbw(device),
        "GB/s",
        ratio,
        ">= 0.8x",
        ratio >= 0.8,
    )


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


def pin_to_one_core() -> int | None:
    """Runs this process (and the threads it starts, autograd's device thread
    among them) on one core, so device and CPU get the same single core."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return core


def run(device: str | None, only: list[str], rounds: int, as_json: bool, pin: bool = True) -> str:
    import torch

    core = pin_to_one_core() if pin else None
    torch.set_num_threads(1)
    if device is None:
        from torchplug import loader

        active = [name for name, status in loader.statuses().items() if status.active]
        if not active:
            raise SystemExit(
                "No torchplug backend is active; install one or check `torchplug doctor`."
            )
        device = active[0]
    figures: list[Figure] = []
    extra: dict[str, object] = {
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "pinned_core": core,
    }
    if "mlp" in only:
        figures.append(bench_mlp(device, rounds))
    if "tiny" in only:
        figures.append(bench_tiny_op(device, rounds))
    if "copy" in only:
        figures += bench_copies(device, rounds)
    if "allreduce" in only:
        figures.append(bench_allreduce(device, rounds))
    if "zoo" in only:
        from torchplug.bench_zoo import bench_zoo

        figures += bench_zoo(device, rounds)
    if "import" in only:
        import_figures, per_backend = bench_import(rounds)
        figures += import_figures
        extra["backend_load_ms"] = per_backend
    if as_json:
        return json.dumps({**extra, "figures": [asdict(f) for f in figures]}, indent=2)
    text = render(figures)
    if "backend_load_ms" in extra:
        text += "\n\nper-backend activation inside import torch: " + ", ".join(
            f"{name} {ms:.1f} ms" for name, ms in extra["backend_load_ms"].items()
        )
    where = f"pinned to core {core}" if core is not None else "not pinned"
    return f"device {device}, {torch.get_num_threads()} thread, {where}\n\n{text}"
