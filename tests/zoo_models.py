"""The model zoo: tiny real architectures run on the CPU and on devices side by side.

Every model is built from a tiny config in code (no downloads) on the CPU, then
copied to each device, so the CPU and the device start from the same weights.
Run as a script, this module checks every model on the devices it is given in
one process and writes the results as JSON; tests/test_model_zoo.py starts
one such process per PrivateUse1 owner and asserts on what it reports.

Checks, each against the CPU in the same process:

- ``ties``: which parameters are one Parameter (tied weights) after ``.to()``;
- ``eval``: the eval-mode forward of the freshly built model;
- ``train``: the losses of 3 AdamW steps (dropout on, same seed). A device
  whose memory the host cannot address runs kernels of its own, which round
  differently from the CPU's (as CUDA's do); AdamW turns the sign of a
  gradient element that rounding leaves near zero into a full step, so its
  losses are compared within twice the *rounding spread*: the most the CPU's
  own losses moved when each gradient was perturbed by one rounding (machine
  epsilon times its largest magnitude), over ``SPREAD_TRIALS`` draws;
- ``generate``: greedy ``generate()`` tokens, of the trained model where the
  device trains and of the fresh one where it does not;
- ``roundtrip``: ``save_pretrained``/``from_pretrained`` (``torch.save`` and
  ``load_state_dict`` for torchvision) back onto the device keeps the weights,
  the ties and the outputs.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch
from torch import nn

from torchplug_bench.zoo import (
    DATA_SEED,
    MODEL_SEED,
    MODELS,
    Batch,
    ZooModel,
    available,
    seed_everything,
    to_device,
)

TRAIN_STEPS = 3
NEW_TOKENS = 8
TRAIN_SEED = 2
SPREAD_TRIALS = 4

logger = logging.getLogger(__name__)


def max_difference(expected: Any, actual: Any) -> float:
    """The largest absolute difference between two (nested) outputs; inf if their
    structure, shapes or dtypes differ."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return float("inf")
        actual = actual.cpu()
        if expected.shape != actual.shape or expected.dtype != actual.dtype:
            return float("inf")
        if expected.numel() == 0:
            return 0.0
        if not expected.is_floating_point():
            return 0.0 if torch.equal(expected, actual) else float("inf")
        return (expected.double() - actual.double()).abs().max().item()
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or expected.keys() != actual.keys():
            return float("inf")
        return max((max_difference(expected[k], actual[k]) for k in expected), default=0.0)
    if isinstance(expected, list | tuple):
        if not isinstance(actual, list | tuple) or len(expected) != len(actual):
            return float("inf")
        return max(
            (max_difference(e, a) for e, a in zip(expected, actual, strict=True)), default=0.0
        )
    if isinstance(expected, float) and isinstance(actual, float):
        return abs(expected - actual)
    return 0.0 if expected == actual else float("inf")


def tie_groups(model: nn.Module) -> list[list[str]]:
    """Names of the parameters that are one Parameter object, for every shared one."""
    by_identity: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        by_identity.setdefault(id(parameter), []).append(name)
    return sorted(sorted(names) for names in by_identity.values() if len(names) > 1)


def train(
    spec: ZooModel,
    model: nn.Module,
    batch: Batch,
    device: str,
    rounding: torch.Generator | None = None,
) -> list[float]:
    """The losses of TRAIN_STEPS AdamW steps; with `rounding`, each gradient is
    first perturbed by one rounding of its largest magnitude, drawn from it."""
    seed_everything(TRAIN_SEED)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    on_device = to_device(batch, device)
    losses = []
    for _ in range(TRAIN_STEPS):
        optimizer.zero_grad()
        loss = spec.loss(model, on_device)
        loss.backward()
        if rounding is not None:
            with torch.no_grad():
                for parameter in model.parameters():
                    if parameter.grad is not None:
                        grad = parameter.grad
                        noise = torch.randn(grad.shape, generator=rounding, dtype=grad.dtype)
                        grad.add_(noise * torch.finfo(grad.dtype).eps * grad.abs().max())
        optimizer.step()
        losses.append(loss.item())
    return losses


def rounding_spread(spec: ZooModel, base: nn.Module, batch: Batch, losses: list[float]) -> float:
    """How far the CPU's losses move under rounding-sized gradient noise (see the module doc)."""
    spread = 0.0
    for trial in range(SPREAD_TRIALS):
        noisy = train(spec, copy.deepcopy(base), batch, "cpu", torch.Generator().manual_seed(trial))
        spread = max(spread, max_difference(losses, noisy))
    return spread


@torch.no_grad()
def evaluate(spec: ZooModel, model: nn.Module, batch: Batch, device: str) -> Any:
    model.eval()
    return to_device(spec.forward(model, to_device(batch, device)), "cpu")


@torch.no_grad()
def generate(model: nn.Module, batch: Batch, device: str) -> list[list[int]]:
    model.eval()
    prompt = batch["input_ids"][:, :4].to(device)
    tokens = model.generate(
        input_ids=prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        do_sample=False,
    )
    return tokens.cpu().tolist()


def roundtrip(spec: ZooModel, model: nn.Module, batch: Batch, device: str) -> dict[str, Any]:
    """Saves the device model and loads it back onto the device."""
    with tempfile.TemporaryDirectory(prefix="zoo-") as directory:
        if spec.library == "transformers":
            model.save_pretrained(directory)
            reloaded = type(model).from_pretrained(directory).to(device)
        else:
            path = Path(directory) / "weights.pt"
            torch.save(model.state_dict(), path)
            torch.manual_seed(MODEL_SEED)
            reloaded = spec.build().to(device)
            reloaded.load_state_dict(torch.load(path, weights_only=True))
    saved, loaded = model.state_dict(), reloaded.state_dict()
    return {
        "weights": max_difference(to_device(saved, "cpu"), loaded),
        "devices": sorted({str(t.device) for t in loaded.values()}),
        "ties": tie_groups(reloaded) == tie_groups(model),
        "outputs": max_difference(
            evaluate(spec, model, batch, device), evaluate(spec, reloaded, batch, device)
        ),
    }


@dataclass
class Outcome:
    """What one check gave on the CPU and on the device, or the error it raised."""

    cpu: Any = None
    device: Any = None
    difference: float | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _attempt(check: Callable[[], Outcome]) -> dict[str, Any]:
    try:
        outcome = check()
    except Exception as error:
        logger.debug("check failed", exc_info=True)
        outcome = Outcome(
            error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-6)}"
        )
    return outcome.__dict__


@dataclass(frozen=True)
class Reference:
    """The CPU's results for one model, which every device must reproduce."""

    eval: Any
    generated: list[list[int]] | None
    losses: list[float] | None
    trained_generated: list[list[int]] | None
    spread: float | None  # rounding_spread, where a device needs it


def cpu_reference(spec: ZooModel, base: nn.Module, batch: Batch, with_spread: bool) -> Reference:
    model = copy.deepcopy(base)
    eval_output = evaluate(spec, model, batch, "cpu")
    generated = generate(model, batch, "cpu") if spec.generates else None
    losses = train(spec, model, batch, "cpu") if spec.trains else None
    trained_generated = generate(model, batch, "cpu") if spec.generates and spec.trains else None
    spread = rounding_spread(spec, base, batch, losses) if with_spread and losses else None
    return Reference(eval_output, generated, losses, trained_generated, spread)


def run_on_device(
    spec: ZooModel, base: nn.Module, batch: Batch, reference: Reference, device: str, trains: bool
) -> dict[str, Any]:
    """Every check of one model on one device, each against the CPU's reference."""
    model = copy.deepcopy(base).to(device)
    results = {
        "ties": _attempt(lambda: Outcome(cpu=tie_groups(base), device=tie_groups(model))),
        "eval": _attempt(lambda: _compare(reference.eval, evaluate(spec, model, batch, device))),
    }
    if spec.trains:
        # Where training is the expected failure it runs on a copy of its own,
        # so the checks after it see the untouched model.
        trained = model if trains else copy.deepcopy(base).to(device)
        results["train"] = _attempt(
            lambda: _compare(
                reference.losses,
                train(spec, trained, batch, device),
                rounding_spread=reference.spread if own_kernels(device) else None,
            )
        )
    if spec.generates:
        expected = reference.trained_generated if trains else reference.generated
        results["generate"] = _attempt(lambda: _compare(expected, generate(model, batch, device)))
    results["roundtrip"] = _attempt(lambda: Outcome(details=roundtrip(spec, model, batch, device)))
    return results


def own_kernels(device: str) -> bool:
    """Whether `device`'s memory is beyond the host, so it runs kernels of its own."""
    from torchplug import _C

    return not _C.host_addressable(device)


def run_model(spec: ZooModel, devices: list[str], train_on: set[str]) -> dict[str, Any]:
    seed_everything(DATA_SEED)
    batch = spec.batch()
    seed_everything(MODEL_SEED)
    base = spec.build()
    with_spread = any(own_kernels(device) for device in train_on)
    reference = cpu_reference(spec, base, batch, with_spread)
    return {
        device: run_on_device(spec, base, batch, reference, device, device in train_on)
        for device in devices
    }


def _compare(expected: Any, actual: Any, rounding_spread: float | None = None) -> Outcome:
    details = {} if rounding_spread is None else {"rounding_spread": rounding_spread}
    return Outcome(
        cpu=expected, device=actual, difference=max_difference(expected, actual), details=details
    )


def _json_ready(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)}"
    if isinstance(value, dict):
        return {str(key): _json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    return value


def main(devices: list[str], train_on: set[str], output: Path) -> None:
    """Runs every available model and rewrites ``output`` after each, so a crash
    leaves the results so far."""
    logging.getLogger("transformers").setLevel(logging.ERROR)
    results: dict[str, Any] = {}
    for spec in MODELS:
        if not available(spec):
            results[spec.name] = {"missing": spec.library}
        else:
            try:
                results[spec.name] = _json_ready(run_model(spec, devices, train_on))
            except Exception as error:  # building the model or the CPU reference failed
                results[spec.name] = {"error": f"{type(error).__name__}: {error}"}
        output.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", required=True, help="comma-separated device types")
    parser.add_argument("--train-on", default="", help="the devices that can run backward")
    parser.add_argument("--output", type=Path, required=True)
    arguments = parser.parse_args()
    main(
        arguments.devices.split(","),
        set(filter(None, arguments.train_on.split(","))),
        arguments.output,
    )
