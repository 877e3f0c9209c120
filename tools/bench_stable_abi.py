"""torch_vnpu's stable-ABI operators against the same operators on torch's C++ API, side by side.

torch_vnpu's operators are built once against torch's stable ABI
(torch/csrc/stable) and load into every torch the core supports; torch calls
them through a boxed convention and they reach tensors through a C shim. The
target: each operator within TARGET times the time of the same operator built
against torch's C++ API (tools/stable_abi_baseline: torch_vnpu's forward
operators as they were before the port, over the same loops), at 4 elements
(the calling cost) and 1M elements (the work), on every supported torch.

Run it in an environment holding torch, torchplug and torch_vnpu (the
workspace's, or a clean one with a release's wheels and another torch):

    uv run tools/bench_stable_abi.py [--rounds 15] [--sizes 4,1048576] [--json]

It builds the baseline against the running torch (cmake and a C++ compiler
on PATH; cached under build/), then times both sides in two processes:
unpinned (what users get) and pinned to one CPU with one intra-op thread;
in each, the operators as users call them (grad mode on: torch runs the
operators' Python autograd registration, which the baseline gets too) and
under torch.inference_mode() (the operator alone, where the calling
convention weighs most). Each round times both operators back to back, in
alternating order; a figure is the median over rounds of the per-round ratio.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE_SOURCE = ROOT / "tools" / "stable_abi_baseline"
TORCH_VNPU_SOURCE = ROOT / "plugins" / "torch_vnpu"
TARGET = 1.10
OPERATORS = ("fast_gelu", "rms_norm")
TIMED_SECONDS = 0.05  # per side per round


def build_baseline(torch_version: str, cmake_dir: str) -> Path:
    """The baseline module built against the running torch (cached by torch version);
    `cmake_dir` is torchplug's CMake package."""
    build = ROOT / "build" / "stable-abi-baseline" / f"torch-{torch_version}"
    suffix = ".abi3.so"
    module = build / f"stable_abi_baseline{suffix}"
    sources = [*BASELINE_SOURCE.iterdir(), TORCH_VNPU_SOURCE / "csrc" / "fused_loops.cpp"]
    if module.exists() and all(s.stat().st_mtime < module.stat().st_mtime for s in sources):
        return module
    cmake = shutil.which("cmake")
    if cmake is None:
        sys.exit(
            "bench_stable_abi: building the baseline needs cmake on PATH (pip install cmake ninja)."
        )
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(
        [
            cmake, "-S", BASELINE_SOURCE, "-B", build, *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dtorchplug_DIR={cmake_dir}",
            f"-DTORCH_VNPU_SOURCE={TORCH_VNPU_SOURCE}",
        ],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    subprocess.run([cmake, "--build", build], check=True, stdout=subprocess.DEVNULL)
    return module


def measure(baseline: Path, device: str, sizes: list[int], rounds: int, pinned: bool) -> list[dict]:
    """Times both sides in this process (imports torch: run in a child)."""
    if pinned:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import importlib.util

    import torch

    if pinned:
        torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("stable_abi_baseline", baseline)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the baseline module {baseline}")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    import torch_vnpu  # noqa: F401  (torch.ops.npu.*)

    register_autograd_like_torch_vnpu(torch)

    def seconds_per_call(operator, args, loops: int) -> float:
        torch.accelerator.synchronize() if device != "cpu" else None
        start = time.perf_counter()
        for _ in range(loops):
            operator(*args)
        torch.accelerator.synchronize() if device != "cpu" else None
        return (time.perf_counter() - start) / loops

    rows = []
    for mode, numel, name in itertools.product(("grad", "inference"), sizes, OPERATORS):
        with torch.inference_mode(mode == "inference"):
            columns = min(numel, 1024)
            x = torch.randn(numel // columns, columns, device=device)
            weight = torch.rand(columns, device=device) + 0.5
            args = (x,) if name == "fast_gelu" else (x, weight, 1e-6)
            stable = getattr(torch.ops.npu, name)
            cxx = getattr(torch.ops.npu_cxx_abi, name)
            equal = torch.equal(stable(*args), cxx(*args))
            loops = max(1, round(TIMED_SECONDS / seconds_per_call(stable, args, loops=3)))
            stable_times, cxx_times = [], []
            for round_ in range(rounds):
                order = ((stable, stable_times), (cxx, cxx_times))
                for operator, times in order if round_ % 2 == 0 else reversed(order):
                    times.append(seconds_per_call(operator, args, loops))
        rows.append(
            {
                "torch": torch.__version__.split("+")[0],
                "pinned": pinned,
                "mode": mode,
                "operator": name,
                "numel": numel,
                "stable_us": statistics.median(stable_times) * 1e6,
                "cxx_abi_us": statistics.median(cxx_times) * 1e6,
                "ratio": statistics.median(
                    a / b for a, b in zip(stable_times, cxx_times, strict=True)
                ),
                "equal": equal,
            }
        )
    return rows


def register_autograd_like_torch_vnpu(torch) -> None:
    """The baseline's operators get autograd formulas registered from Python as
    torch_vnpu's are (torch_vnpu/_ops.py), so a call in grad mode takes the
    same path on both sides."""

    def save_inputs(ctx, inputs, output) -> None:
        ctx.save_for_backward(*(i for i in inputs if isinstance(i, torch.Tensor)))

    def fast_gelu_backward(ctx, grad):
        return torch.ops.npu.fast_gelu_backward(grad, *ctx.saved_tensors)

    def rms_norm_backward(ctx, grad):
        return (*torch.ops.npu.rms_norm_backward(grad, *ctx.saved_tensors, 1e-6), None)

    torch.library.register_autograd(
        "npu_cxx_abi::fast_gelu", fast_gelu_backward, setup_context=save_inputs
    )
    torch.library.register_autograd(
        "npu_cxx_abi::rms_norm", rms_norm_backward, setup_context=save_inputs
    )


def table(rows: list[dict]) -> str:
    lines = [
        f"{'torch':<8} {'pinning':<9} {'mode':<9} {'operator':<10} {'elements':>9} {'stable µs':>10} "
        f"{'C++ ABI µs':>11} {'ratio':>6}  (target ≤ {TARGET})"
    ]
    for row in rows:
        verdict = "" if row["ratio"] <= TARGET else "  over target"
        if not row["equal"]:
            verdict += "  RESULTS DIFFER"
        lines.append(
            f"{row['torch']:<8} {'one CPU' if row['pinned'] else 'unpinned':<9} {row['mode']:<9} "
            f"{row['operator']:<10} "
            f"{row['numel']:>9} {row['stable_us']:>10.2f} {row['cxx_abi_us']:>11.2f} "
            f"{row['ratio']:>6.3f}{verdict}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--sizes", default="4,1048576", help="element counts, comma-separated")
    parser.add_argument("--device", default="npu", help="npu (default) or cpu")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--child", choices=["unpinned", "pinned"], help=argparse.SUPPRESS)
    parser.add_argument("--baseline", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.child:
        rows = measure(args.baseline, args.device, sizes, args.rounds, args.child == "pinned")
        print(json.dumps(rows))
        return 0

    version, cmake_dir = subprocess.run(
        [sys.executable, "-c", "import torch, torchplug; print(torch.__version__, torchplug.get_cmake_dir())"],
        check=True, capture_output=True, text=True, env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    ).stdout.split()  # fmt: skip
    baseline = build_baseline(version, cmake_dir)
    # The npu backend must own PrivateUse1 in the children (foo would by name order).
    env = {**os.environ, "TORCHPLUG_PRIVATEUSE1": "npu"}
    rows = []
    for child in ("unpinned", "pinned"):
        output = subprocess.run(
            [
                sys.executable, __file__, "--child", child, "--baseline", str(baseline),
                "--rounds", str(args.rounds), "--sizes", args.sizes, "--device", args.device,
            ],
            check=True, capture_output=True, text=True, env=env,
        ).stdout  # fmt: skip
        rows += json.loads(output.strip().splitlines()[-1])
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
