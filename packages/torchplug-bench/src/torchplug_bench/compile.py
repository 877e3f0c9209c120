"""torch.compile on the device against torch.compile on the CPU.

Step times interleave the device and the CPU in one process. Compile times
are each measured in a fresh interpreter with an empty Inductor cache, since
the device's C++ kernels are the CPU's and a shared cache would hand the
second compile the first one's work.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

from torchplug_bench.figures import (
    FOREACH,
    Candidate,
    Figure,
    median_rounds,
    paired_ratio,
    step_time_figure,
)
from torchplug_bench.targets import compile_time, compiled_step, eager_against_compiled

WORKLOADS = ("mlp", "transformer_lm")


class TinyTransformerLM(nn.Module):
    """Two encoder layers under a causal mask, input embeddings tied to the head."""

    VOCAB = 50

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(self.VOCAB, width)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, self.VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(
            tokens.shape[1], device=tokens.device
        )
        hidden = self.layers(self.embed(tokens), mask=causal, is_causal=True)
        return self.head(self.norm(hidden))


def build_model(workload: str) -> nn.Module:
    """The workloads the compile tests and this benchmark share, seeded."""
    torch.manual_seed(0)
    if workload == "mlp":
        return nn.Sequential(
            nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)
        )
    if workload == "transformer_lm":
        return TinyTransformerLM()
    raise ValueError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")


def batches(workload: str, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Deterministic (inputs, targets) pairs on the CPU."""
    generator = torch.Generator().manual_seed(1)
    if workload == "mlp":
        return [
            (torch.randn(16, 32, generator=generator), torch.randn(16, 8, generator=generator))
            for _ in range(steps)
        ]
    pairs = []
    for _ in range(steps):
        tokens = torch.randint(0, TinyTransformerLM.VOCAB, (4, 12), generator=generator)
        pairs.append((tokens[:, :-1], tokens[:, 1:]))
    return pairs


def loss(
    workload: str, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    output = model(inputs)
    if workload == "mlp":
        return F.mse_loss(output, targets)
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), targets.reshape(-1))


def _training_step(workload: str, device: str, compiled: bool) -> Candidate:
    model = build_model(workload).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, foreach=FOREACH)
    inputs, targets = (t.to(device) for t in batches(workload, 1)[0])

    def forward_backward() -> None:
        loss(workload, model, inputs, targets).backward()

    run = torch.compile(forward_backward) if compiled else forward_backward
    update = torch.compile(optimizer.step) if compiled else optimizer.step

    def step() -> None:
        run()
        update()
        optimizer.zero_grad(set_to_none=False)

    return Candidate(device, step)


_COMPILE_TIME_CHILD = """
import json, sys, time
import torch
from torchplug_bench.compile import _training_step
from torchplug_bench.figures import synchronizer
torch.set_num_threads(1)
workload, device = sys.argv[1], sys.argv[2]
step = _training_step(workload, device, compiled=True)
finish = synchronizer(device)
started = time.perf_counter()
step.run()
finish()
print(json.dumps(time.perf_counter() - started))
"""


def _compile_seconds(workload: str, device: str) -> float:
    import torchplug

    with tempfile.TemporaryDirectory(prefix="torchplug-inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        if device in torchplug.privateuse1_candidates():
            env["TORCHPLUG_PRIVATEUSE1"] = device
        completed = subprocess.run(
            [sys.executable, "-c", _COMPILE_TIME_CHILD, workload, device],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if completed.returncode != 0:
        raise RuntimeError(f"compiling {workload} on {device} failed:\n{completed.stderr[-3000:]}")
    return float(completed.stdout.strip().splitlines()[-1])


def _bench_steps(workload: str, device: str, rounds: int) -> list[Figure]:
    """The compiled step on the device against the CPU's, and the device's eager step
    against its compiled one."""
    candidates = {
        "cpu": _training_step(workload, "cpu", compiled=True),
        device: _training_step(workload, device, compiled=True),
        "eager": _training_step(workload, device, compiled=False),
    }
    times = median_rounds(candidates, repeat=20, rounds=rounds)
    return [
        step_time_figure(compiled_step(workload), times, device),
        Figure(
            eager_against_compiled(workload),
            times[device] * 1e3,
            times["eager"] * 1e3,
            paired=paired_ratio(times, "eager", device),
        ),
    ]


def _bench_compile_time(workload: str, device: str, rounds: int) -> Figure:
    """The first compiled step's time, each in a fresh interpreter with an empty cache."""
    compile_times: dict[str, list[float]] = {"cpu": [], device: []}
    for _ in range(max(1, min(rounds, 3))):
        for target in compile_times:
            compile_times[target].append(_compile_seconds(workload, target))
    seconds = {name: statistics.median(values) for name, values in compile_times.items()}
    return Figure(compile_time(workload), seconds["cpu"], seconds[device])


def bench_compile(device: str, rounds: int) -> list[Figure]:
    figures: list[Figure] = []
    for workload in WORKLOADS:
        try:
            figures += _bench_steps(workload, device, rounds)
        except Exception as error:
            figures += [
                Figure.failed(row, error)
                for row in (compiled_step(workload), eager_against_compiled(workload))
            ]
        torch._dynamo.reset()
        try:
            figures.append(_bench_compile_time(workload, device, rounds))
        except Exception as error:
            figures.append(Figure.failed(compile_time(workload), error))
    return figures
