"""torch.compile (Inductor) runs real models on every device as it runs them on the CPU.

The compile tests of the core (core/tests/test_compile.py) use models written
here; this module compiles architectures nobody here wrote, taken from the
model zoo (torchplug_bench.zoo: a GPT-2 LM with tied embeddings, a BERT
encoder, a Llama with RoPE and grouped-query attention, torchvision's
resnet18), so the graphs hold what real models bring to Inductor: batch norm,
convolutions, rotary embeddings, attention masks, tied weights, dropout. Each
is checked against the same model compiled for the CPU in the same process:

- ``eval``: the compiled eval forward (fp32, within 1e-5), on foo, npu and hpu;
- ``train``: the losses of 2 steps of a compiled forward+backward step
  function (AdamW stepping eagerly, dropout on, same seed), on foo, for
  GPT-2 and resnet18 (a transformer with tied weights, a convnet with batch
  norm). Kept out to keep the suite in its time budget, each covered
  elsewhere: npu, which compiles the same generated code through the same
  integration as foo (a renamed PrivateUse1), checks eval alone; BERT's and
  Llama's backward graphs are compiled by neither (their forward graphs by
  eval, their eager training by tests/test_model_zoo.py); hpu is left out,
  its backward fails upstream (see tests/test_model_zoo.py);
- graph breaks: Dynamo breaks no graph on the device that it does not also
  break on the CPU, so the device adds nothing Dynamo cannot trace.

Run as a child process's ``main``, this module compiles the models on the
devices it is given and writes the results as JSON; the tests start one such
process per PrivateUse1 owner (``foo`` with ``hpu`` beside it, then ``npu``
with ``TORCHPLUG_PRIVATEUSE1=npu``) and each reads its own result.

Inductor's cache is whichever the environment uses (by default the persistent
one under the temp directory): compiling these graphs cold takes minutes on
two cores, and a cache hit gives the kernels a cold compile would, since the
cache key of a torchplug device includes the code generator's revision.
"""

from __future__ import annotations

import copy
import json
import logging
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters
from zoo_models import max_difference

from fresh_interpreter import MODEL_RUNS, ChildReports, model_report
from torchplug_bench.zoo import (
    DATA_SEED,
    MODEL_SEED,
    MODELS_BY_NAME,
    Batch,
    ZooModel,
    available,
    seed_everything,
    to_device,
)

# A child compiles four models for two devices: minutes on two cores.
pytestmark = pytest.mark.slow

MODEL_NAMES = ("gpt2", "bert", "llama", "resnet18")
# The devices and models whose compiled training is checked (see the module's docstring).
TRAIN_ON = {"foo"}
TRAIN_MODELS = {"gpt2", "resnet18"}
TRAIN_STEPS = 2
TRAIN_SEED = 2
OUTPUT_TOLERANCE = 1e-5
LOSS_TOLERANCE = 1e-5
# A hang detector, not a time limit: the child compiles four models for two
# devices, 3-4 minutes on a quiet 2-core machine; at a load average of 10 one
# such child took over 15 minutes.
CHILD_TIMEOUT_SECONDS = 1800


@dataclass(frozen=True)
class CompiledRun:
    """What one compiled run gave and what Dynamo counted while compiling it."""

    value: Any  # the eval output, on the CPU, or the training losses
    output_device: str
    graph_breaks: dict[str, int]  # by the first line of the reason
    graphs: int


def _fresh_dynamo() -> None:
    """Forgets every compiled frame and count, so that each run compiles its own
    graphs and the counters hold only its breaks."""
    torch._dynamo.reset()
    counters.clear()


def _dynamo_counts() -> tuple[dict[str, int], int]:
    # The rest of a reason is hints and a debug context naming Python objects.
    breaks: Counter[str] = Counter()
    for reason, count in counters["graph_break"].items():
        breaks[reason.strip().splitlines()[0]] += count
    return dict(breaks), counters["stats"]["unique_graphs"]


def compiled_eval(spec: ZooModel, base: nn.Module, batch: Batch, device: str) -> CompiledRun:
    model = copy.deepcopy(base).to(device).eval()
    _fresh_dynamo()
    with torch.no_grad():
        output = spec.forward(torch.compile(model), to_device(batch, device))
    return CompiledRun(to_device(output, "cpu"), str(output.device), *_dynamo_counts())


def compiled_training(spec: ZooModel, base: nn.Module, batch: Batch, device: str) -> CompiledRun:
    # Seeded before the first step, as a training script does: dropout's masks
    # come from the device's generator inside compiled code.
    seed_everything(TRAIN_SEED)
    model = copy.deepcopy(base).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    on_device = to_device(batch, device)

    @torch.compile
    def step(inputs: dict[str, Any]) -> torch.Tensor:
        loss = spec.loss(model, inputs)
        loss.backward()
        return loss.detach()

    _fresh_dynamo()
    losses = []
    for _ in range(TRAIN_STEPS):
        optimizer.zero_grad()
        loss = step(on_device)
        optimizer.step()
        losses.append(loss.item())
    return CompiledRun(losses, str(loss.device), *_dynamo_counts())


def _compare(reference: CompiledRun, run: Callable[[], CompiledRun]) -> dict[str, Any]:
    """The device's run beside the CPU's, or the error the device's run raised."""
    try:
        outcome = run()
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-8)}"}
    report = {
        "error": None,
        "difference": max_difference(reference.value, outcome.value),
        "output_device": outcome.output_device,
        "cpu": asdict(reference),
        "device": asdict(outcome),
    }
    for side in ("cpu", "device"):
        if not isinstance(report[side]["value"], list):
            del report[side]["value"]  # an output tensor: its difference is what counts
    return report


def run_model(name: str, devices: list[str], train_on: set[str]) -> dict[str, Any]:
    spec = MODELS_BY_NAME[name]
    seed_everything(DATA_SEED)
    batch = spec.batch()
    seed_everything(MODEL_SEED)
    base = spec.build()
    eval_reference = compiled_eval(spec, base, batch, "cpu")
    train_on = train_on if name in TRAIN_MODELS else set()
    train_reference = compiled_training(spec, base, batch, "cpu") if train_on else None
    results: dict[str, Any] = {}
    for device in devices:
        results[device] = {
            "eval": _compare(eval_reference, partial(compiled_eval, spec, base, batch, device))
        }
        if device in train_on and train_reference is not None:
            results[device]["train"] = _compare(
                train_reference, partial(compiled_training, spec, base, batch, device)
            )
    return results


def main(devices: list[str], train_on: set[str], output: Path) -> None:
    """Compiles every model of MODEL_NAMES whose library is installed, rewriting
    ``output`` after each, so that a crash leaves the results so far."""
    logging.getLogger("transformers").setLevel(logging.ERROR)
    results: dict[str, Any] = {}
    for name in MODEL_NAMES:
        if not available(MODELS_BY_NAME[name]):
            results[name] = {"missing": MODELS_BY_NAME[name].library}
        else:
            try:
                results[name] = run_model(name, devices, train_on)
            except Exception as error:  # building the model or compiling it for the CPU
                results[name] = {"error": f"{type(error).__name__}: {error}"}
        output.write_text(json.dumps(results, indent=1))


class CompileResults:
    """Starts each child run on first use and keeps what it reported."""

    def __init__(self, scratch: Path) -> None:
        self.children = ChildReports(Path(__file__).stem, scratch, CHILD_TIMEOUT_SECONDS)

    def outcome(self, model: str, device: str, check: str) -> dict[str, Any]:
        """One check's result, failing the test with the device's error if it raised."""
        pytest.importorskip(MODELS_BY_NAME[model].library)
        result = model_report(self.children, model, device, TRAIN_ON)
        if "error" in result:
            pytest.fail(f"{model} could not be built or compiled for the CPU: {result['error']}")
        outcome = result[device][check]
        assert outcome["error"] is None, (
            f"compiled {check} of {model} failed on {device}:\n{outcome['error']}"
        )
        return outcome


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> CompileResults:
    return CompileResults(tmp_path_factory.mktemp("compile-real-models"))


def checked_cases() -> list[Any]:
    """(model, device, check): eval on every device, train on those of ``train_on``."""
    return [
        pytest.param(model, device, check, id=f"{model}-{device}-{check}")
        for check in ("eval", "train")
        for run in MODEL_RUNS
        for device in (
            [name for name in run.train_on if name in TRAIN_ON] if check == "train" else run.devices
        )
        for model in MODEL_NAMES
        if check == "eval" or model in TRAIN_MODELS
    ]


# What each check compares, and how far the device's may be from the compiled CPU's.
COMPARED = {
    "eval": ("the compiled eval output differs", OUTPUT_TOLERANCE),
    "train": ("the compiled training losses differ", LOSS_TOLERANCE),
}


@pytest.mark.parametrize(("model", "device", "check"), checked_cases())
def test_compiled_model_matches_compiled_cpu(
    compiled: CompileResults, model: str, device: str, check: str
) -> None:
    outcome = compiled.outcome(model, device, check)
    # A graph Dynamo never made, or outputs on the CPU, would pass the
    # comparison without compiling anything for the device.
    assert outcome["output_device"] == f"{device}:0", (
        f"the outputs are on {outcome['output_device']}"
    )
    assert outcome["device"]["graphs"] >= 1, "Dynamo compiled no graph"
    what, tolerance = COMPARED[check]
    difference = outcome["difference"]
    # Losses are reported and shown; an output tensor is not (its difference says it all).
    values = (
        f":\n  cpu:    {outcome['cpu']['value']}\n  device: {outcome['device']['value']}"
        if "value" in outcome["cpu"]
        else ""
    )
    assert difference <= tolerance, (
        f"{what} from the compiled CPU's by {difference:g} (tolerance {tolerance:g}){values}"
    )


@pytest.mark.parametrize(("model", "device", "check"), checked_cases())
def test_no_graph_break_beyond_the_cpu(
    compiled: CompileResults, model: str, device: str, check: str
) -> None:
    outcome = compiled.outcome(model, device, check)
    on_cpu, on_device = outcome["cpu"]["graph_breaks"], outcome["device"]["graph_breaks"]
    extra = {
        reason: count - on_cpu.get(reason, 0)
        for reason, count in on_device.items()
        if count > on_cpu.get(reason, 0)
    }
    assert not extra, (
        f"graph breaks on {device} that the CPU does not have: {extra}\n"
        f"  cpu: {on_cpu} ({outcome['cpu']['graphs']} graphs)\n"
        f"  {device}: {on_device} ({outcome['device']['graphs']} graphs)"
    )
