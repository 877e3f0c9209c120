"""The model zoo: tiny real architectures run on the CPU and on devices side by side.

Every model is built from a tiny config in code (no downloads) on the CPU, then
copied to each device, so the CPU and the device start from the same weights.
Run as a script, this module checks every model on the devices it is given in
one process and writes the results as JSON; tests/test_model_zoo.py starts
one such process per PrivateUse1 owner and asserts on what it reports.

Checks, each against the CPU in the same process:

- ``ties``: which parameters are one Parameter (tied weights) after ``.to()``;
- ``eval``: the eval-mode forward of the freshly built model;
- ``train``: the losses of 3 AdamW steps (dropout on, same seed);
- ``generate``: greedy ``generate()`` tokens, of the trained model where the
  device trains and of the fresh one where it does not;
- ``roundtrip``: ``save_pretrained``/``from_pretrained`` (``torch.save`` and
  ``load_state_dict`` for torchvision) back onto the device keeps the weights,
  the ties and the outputs.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import logging
import os
import random
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

VOCAB = 99
TRAIN_STEPS = 3
NEW_TOKENS = 8
MODEL_SEED = 0
DATA_SEED = 1
TRAIN_SEED = 2

Batch = dict[str, Any]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ZooModel:
    name: str
    library: str  # the package it needs: "transformers" or "torchvision"
    build: Callable[[], nn.Module]
    batch: Callable[[], Batch]
    trains: bool = True
    generates: bool = False

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        if self.library == "transformers":
            return model(**batch).loss
        return nn.functional.cross_entropy(model(batch["images"]), batch["labels"])

    def forward(self, model: nn.Module, batch: Batch) -> Any:
        if self.library == "transformers":
            return model(**batch).logits
        return model(batch["images"])


def _tokens(batch_size: int = 2, length: int = 12) -> torch.Tensor:
    return torch.randint(2, VOCAB, (batch_size, length))


def _causal_lm_batch() -> Batch:
    ids = _tokens()
    return {"input_ids": ids, "labels": ids}


def _masked_lm_batch() -> Batch:
    ids = _tokens()
    masked = torch.rand(ids.shape) < 0.3
    masked[:, 0] = True  # at least one prediction per row
    return {"input_ids": ids.masked_fill(masked, 1), "labels": ids.masked_fill(~masked, -100)}


def _seq2seq_batch() -> Batch:
    return {"input_ids": _tokens(), "labels": _tokens(length=7)}


def _image_batch(size: int = 32, classes: int = 5, batch_size: int = 4) -> Batch:
    return {
        "pixel_values": torch.randn(batch_size, 3, size, size),
        "labels": torch.randint(0, classes, (batch_size,)),
    }


def _speech_batch() -> Batch:
    return {"input_values": torch.randn(2, 1600), "labels": torch.randint(1, 12, (2, 5))}


def _vision_batch() -> Batch:
    return {"images": torch.randn(4, 3, 32, 32), "labels": torch.randint(0, 10, (4,))}


def _detection_batch() -> Batch:
    return {"images": [torch.rand(3, 80, 96), torch.rand(3, 64, 64)]}


def _lm_sizes() -> dict[str, int]:
    return {
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": 64,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 1,
    }


def _gpt2() -> nn.Module:
    import transformers

    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    return transformers.GPT2LMHeadModel(config)


def _bert() -> nn.Module:
    import transformers

    sizes = {k: v for k, v in _lm_sizes().items() if k not in ("bos_token_id", "eos_token_id")}
    return transformers.BertForMaskedLM(transformers.BertConfig(**sizes))


def _t5() -> nn.Module:
    import transformers

    config = transformers.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    return transformers.T5ForConditionalGeneration(config)


def _vit() -> nn.Module:
    import transformers

    config = transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        num_labels=5,
    )
    return transformers.ViTForImageClassification(config)


def _llama() -> nn.Module:
    import transformers

    config = transformers.LlamaConfig(**_lm_sizes(), num_key_value_heads=2)
    return transformers.LlamaForCausalLM(config)


def _mixtral() -> nn.Module:
    import transformers

    config = transformers.MixtralConfig(
        **_lm_sizes(),
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        output_router_logits=True,
    )
    return transformers.MixtralForCausalLM(config)


def _gemma() -> nn.Module:
    import transformers

    config = transformers.GemmaConfig(**_lm_sizes(), num_key_value_heads=1, head_dim=8)
    return transformers.GemmaForCausalLM(config)


def _wav2vec2() -> nn.Module:
    import transformers

    config = transformers.Wav2Vec2Config(
        vocab_size=12,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        mask_time_prob=0.2,
        mask_time_length=2,
        pad_token_id=0,
    )
    return transformers.Wav2Vec2ForCTC(config)


def _convnext() -> nn.Module:
    import transformers

    config = transformers.ConvNextConfig(
        num_channels=3,
        patch_size=2,
        hidden_sizes=[16, 32],
        depths=[1, 1],
        num_stages=2,
        num_labels=5,
        image_size=32,
    )
    return transformers.ConvNextForImageClassification(config)


def _resnet18() -> nn.Module:
    import torchvision

    return torchvision.models.resnet18(weights=None, num_classes=10)


def _mobilenet_v3_small() -> nn.Module:
    import torchvision

    return torchvision.models.mobilenet_v3_small(weights=None, num_classes=10)


def _fasterrcnn() -> nn.Module:
    import torchvision

    # Three classes keep random-init scores above the detection threshold, so
    # the comparison sees boxes.
    return torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=3
    )


MODELS: tuple[ZooModel, ...] = (
    ZooModel("gpt2", "transformers", _gpt2, _causal_lm_batch, generates=True),
    ZooModel("bert", "transformers", _bert, _masked_lm_batch),
    ZooModel("t5", "transformers", _t5, _seq2seq_batch, generates=True),
    ZooModel("vit", "transformers", _vit, _image_batch),
    ZooModel("llama", "transformers", _llama, _causal_lm_batch, generates=True),
    ZooModel("mixtral", "transformers", _mixtral, _causal_lm_batch, generates=True),
    ZooModel("gemma", "transformers", _gemma, _causal_lm_batch, generates=True),
    ZooModel("wav2vec2", "transformers", _wav2vec2, _speech_batch),
    ZooModel("convnext", "transformers", _convnext, _image_batch),
    ZooModel("resnet18", "torchvision", _resnet18, _vision_batch),
    ZooModel("mobilenet_v3_small", "torchvision", _mobilenet_v3_small, _vision_batch),
    ZooModel("fasterrcnn_mobilenet_v3", "torchvision", _fasterrcnn, _detection_batch, trains=False),
)
MODELS_BY_NAME = {model.name: model for model in MODELS}


def available(model: ZooModel) -> bool:
    return importlib.util.find_spec(model.library) is not None


def seed_everything(seed: int) -> None:
    """What a training script seeds: wav2vec2's time masks draw from numpy."""
    import numpy  # a dependency of transformers and torchvision, not of these tests

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


def to_device(value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_device(item, device) for item in value)
    return value


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


def train(spec: ZooModel, model: nn.Module, batch: Batch, device: str) -> list[float]:
    seed_everything(TRAIN_SEED)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    on_device = to_device(batch, device)
    losses = []
    for _ in range(TRAIN_STEPS):
        optimizer.zero_grad()
        loss = spec.loss(model, on_device)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


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


def cpu_reference(spec: ZooModel, base: nn.Module, batch: Batch) -> Reference:
    model = copy.deepcopy(base)
    eval_output = evaluate(spec, model, batch, "cpu")
    generated = generate(model, batch, "cpu") if spec.generates else None
    losses = train(spec, model, batch, "cpu") if spec.trains else None
    trained_generated = generate(model, batch, "cpu") if spec.generates and spec.trains else None
    return Reference(eval_output, generated, losses, trained_generated)


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
            lambda: _compare(reference.losses, train(spec, trained, batch, device))
        )
    if spec.generates:
        expected = reference.trained_generated if trains else reference.generated
        results["generate"] = _attempt(lambda: _compare(expected, generate(model, batch, device)))
    results["roundtrip"] = _attempt(lambda: Outcome(details=roundtrip(spec, model, batch, device)))
    return results


def run_model(spec: ZooModel, devices: list[str], train_on: set[str]) -> dict[str, Any]:
    seed_everything(DATA_SEED)
    batch = spec.batch()
    seed_everything(MODEL_SEED)
    base = spec.build()
    reference = cpu_reference(spec, base, batch)
    return {
        device: run_on_device(spec, base, batch, reference, device, device in train_on)
        for device in devices
    }


def _compare(expected: Any, actual: Any) -> Outcome:
    return Outcome(cpu=expected, device=actual, difference=max_difference(expected, actual))


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
