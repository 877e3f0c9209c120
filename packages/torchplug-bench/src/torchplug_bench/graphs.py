"""A captured training step replayed: the zoo's GPT-2 step (AdamW with
``capturable=True``) captured once into a device graph, each step one
``replay()``.

Two figures: the host's time per step (launching a replay against launching
the same step eagerly on the device, neither waiting for the device), and the
replayed step's time against the CPU's eager step, which has no graphs.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable

import torch

from torchplug_bench import figures, targets, zoo
from torchplug_bench.figures import Figure

MODEL = "gpt2"


def training_step(
    device: str, capturable: bool
) -> tuple[Callable[[], torch.Tensor], torch.nn.Module]:
    """The zoo's GPT-2, seeded as the zoo seeds it, and its AdamW training step
    (which returns the loss); the tests capture it too."""
    spec = zoo.MODELS_BY_NAME[MODEL]
    zoo.seed_everything(zoo.DATA_SEED)
    batch = zoo.to_device(spec.batch(), device)
    zoo.seed_everything(zoo.MODEL_SEED)
    model = copy.deepcopy(spec.build()).to(device).train()
    options = {"capturable": True} if capturable else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=figures.FOREACH, **options)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = spec.loss(model, batch)
        loss.backward()
        optimizer.step()
        return loss

    return step, model


def _captured(device: str) -> Callable[[], None]:
    """The step captured after warm-up steps on a side stream; returns its replay."""
    module = torch.get_device_module(device)
    step, _ = training_step(device, capturable=True)
    side = module.Stream()
    side.wait_stream(module.current_stream())
    with module.stream(side):
        for _ in range(3):
            step()
    module.synchronize()
    graph = module.Graph()
    with module.graph(graph):
        step()
    return graph.replay


def _host_seconds(
    candidates: dict[str, Callable[[], object]], device: str, rounds: int
) -> dict[str, float]:
    """Median host time per call: the calls' time to return, the device's work
    finished between rounds (not timed)."""
    finish = figures.synchronizer(device)
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, run in candidates.items():
            finish()
            started = time.perf_counter()
            for _ in range(10):
                run()
            samples[name].append((time.perf_counter() - started) / 10)
            finish()
    return {name: statistics.median(values) for name, values in samples.items()}


def bench_graphs(device: str, rounds: int) -> list[Figure]:
    host_row, step_row = targets.GRAPH_HOST_TIME, targets.GRAPH_STEP
    if not zoo.available(zoo.MODELS_BY_NAME[MODEL]):
        reason = "needs transformers, which is not installed"
        return [Figure.failed(host_row, reason), Figure.failed(step_row, reason)]
    try:
        replay = _captured(device)
        eager, _ = training_step(device, capturable=False)
        host = _host_seconds({"eager": eager, "replay": replay}, device, rounds)
        times = figures.median_rounds(
            {
                "cpu": figures.Candidate("cpu", training_step("cpu", capturable=False)[0]),
                device: figures.Candidate(device, replay),
            },
            repeat=20,
            rounds=rounds,
        )
    except Exception as error:
        return [Figure.failed(host_row, error), Figure.failed(step_row, error)]
    return [
        Figure(host_row, host["eager"] * 1e3, host["replay"] * 1e3),
        figures.step_time_figure(step_row, times, device),
    ]
