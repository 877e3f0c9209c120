"""``torchplug bench``: the project's speed targets, measured side by side.

Every figure is a ratio measured in one run against a baseline measured in
the same run (interleaved rounds, medians), so machine load affects both.

``run()`` measures the single-process figures here; ``zoo`` times real
architectures' training steps, ``distributed`` all_reduce across ranks.
Nothing imports this package but the ``torchplug bench`` command: ``import
torch`` (autoload) never does.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict

from torchplug_bench.figures import Figure, median_rounds, render, step_time_figure


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
    # Asynchronous launches let the host's Python run while the device computes.
    return step_time_figure("MLP training step (64x512, 3 Linear, SGD)", times, device, target=1.0)


def bench_mlp_sanitizer(device: str, rounds: int) -> Figure:
    """The MLP step with the stream sanitizer on, against the same step without it."""
    from torchplug import sanitizer

    step = _mlp_step(device)

    def sanitized() -> None:
        with sanitizer.enabled():
            step()

    times = median_rounds({"off": step, "sanitizer": sanitized}, repeat=30, rounds=rounds)
    ratio = times["sanitizer"] / times["off"]
    return Figure(
        "MLP training step with the stream sanitizer",
        "sanitizer off",
        times["off"] * 1e3,
        times["sanitizer"] * 1e3,
        "ms",
        ratio,
        "<= 3.00x",
        ratio <= 3.0,
    )


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
        figures.append(bench_mlp_sanitizer(device, rounds))
    if "tiny" in only:
        figures.append(bench_tiny_op(device, rounds))
    if "copy" in only:
        figures += bench_copies(device, rounds)
    if "allreduce" in only:
        from torchplug_bench.distributed import bench_allreduce

        figures.append(bench_allreduce(device, rounds))
    if "zoo" in only:
        from torchplug_bench.zoo import bench_zoo

        figures += bench_zoo(device, rounds)
    if "compile" in only:
        from torchplug_bench.compile import bench_compile

        figures += bench_compile(device, rounds)
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
