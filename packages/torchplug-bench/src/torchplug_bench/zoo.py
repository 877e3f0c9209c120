"""The model zoo, and ``torchplug bench --only zoo``: training steps of real
architectures, device against CPU.

The zoo is tiny models of real HF transformers and torchvision architectures,
built from configs in code (nothing is downloaded). Each trainable model's
AdamW step is timed on the CPU and on the device in interleaved rounds.
torchplug's model-zoo tests (tests/test_model_zoo.py) check the same models
for equality with the CPU.

Needs ``transformers`` and/or ``torchvision`` (the ``zoo`` extra); a model
whose package is missing, or that fails to train, is a failed row.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import torchplug.runtime
from torchplug_bench.figures import (
    FOREACH,
    Candidate,
    Figure,
    median_rounds,
    step_time_figure,
    synchronizer,
)
from torchplug_bench.targets import Row, zoo_step

VOCAB = 99
MODEL_SEED = 0
DATA_SEED = 1

Batch = dict[str, Any]


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


# The transformers image models' input size and classes, which their batches match.
_IMAGE_SIZE = 32
_IMAGE_CLASSES = 5


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


def _image_batch(batch_size: int = 4) -> Batch:
    return {
        "pixel_values": torch.randn(batch_size, 3, _IMAGE_SIZE, _IMAGE_SIZE),
        "labels": torch.randint(0, _IMAGE_CLASSES, (batch_size,)),
    }


def _speech_batch() -> Batch:
    return {"input_values": torch.randn(2, 1600), "labels": torch.randint(1, 12, (2, 5))}


def _vision_batch() -> Batch:
    return {"images": torch.randn(4, 3, 32, 32), "labels": torch.randint(0, 10, (4,))}


def _detection_batch() -> Batch:
    return {"images": [torch.rand(3, 80, 96), torch.rand(3, 64, 64)]}


def _transformers(model: str, config: str, **options: Any) -> Callable[[], nn.Module]:
    """Builds ``transformers.<model>`` from ``transformers.<config>(**options)``.

    transformers is imported only when a model is built: listing the zoo (the
    report's planned rows) must work without the ``zoo`` extra.
    """

    def build() -> nn.Module:
        import transformers

        return getattr(transformers, model)(getattr(transformers, config)(**options))

    return build


def _torchvision(model: str, **options: Any) -> Callable[[], nn.Module]:
    """Builds torchvision's ``model``, randomly initialised (nothing is downloaded)."""

    def build() -> nn.Module:
        import torchvision

        return torchvision.models.get_model(model, weights=None, **options)

    return build


# The transformers' shared sizes (GPT-2 and T5 call them by their own names).
_SIZES = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
}
_SPECIAL_TOKENS = {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1}
_LANGUAGE_MODEL = {"vocab_size": VOCAB, "max_position_embeddings": 64, **_SIZES, **_SPECIAL_TOKENS}
_IMAGE_MODEL = {"image_size": _IMAGE_SIZE, "num_labels": _IMAGE_CLASSES}
_GPT2_SIZES = {"n_positions": 64, "n_embd": 32, "n_layer": 2, "n_head": 4}
_T5_SIZES = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4}

_GPT2 = _transformers(
    "GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, **_GPT2_SIZES, **_SPECIAL_TOKENS
)
# BERT encodes: it has padding but no start or end token.
_BERT = _transformers(
    "BertForMaskedLM",
    "BertConfig",
    **{k: v for k, v in _LANGUAGE_MODEL.items() if k not in ("bos_token_id", "eos_token_id")},
)
_T5 = _transformers(
    "T5ForConditionalGeneration",
    "T5Config",
    vocab_size=VOCAB,
    **_T5_SIZES,
    decoder_start_token_id=0,
    pad_token_id=0,
    eos_token_id=1,
)
_VIT = _transformers(
    "ViTForImageClassification", "ViTConfig", **_SIZES, **_IMAGE_MODEL, patch_size=8
)
_LLAMA = _transformers("LlamaForCausalLM", "LlamaConfig", **_LANGUAGE_MODEL, num_key_value_heads=2)
_MIXTRAL = _transformers(
    "MixtralForCausalLM",
    "MixtralConfig",
    **_LANGUAGE_MODEL,
    num_key_value_heads=2,
    num_local_experts=4,
    num_experts_per_tok=2,
    output_router_logits=True,
)
_GEMMA = _transformers(
    "GemmaForCausalLM", "GemmaConfig", **_LANGUAGE_MODEL, num_key_value_heads=1, head_dim=8
)
_WAV2VEC2 = _transformers(
    "Wav2Vec2ForCTC",
    "Wav2Vec2Config",
    vocab_size=12,
    **_SIZES,
    conv_dim=(16, 16, 16),
    conv_stride=(5, 4, 4),
    conv_kernel=(10, 4, 4),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=4,
    mask_time_prob=0.2,
    mask_time_length=2,
    pad_token_id=0,
    # LayerDrop draws from the CPU generator between the device's dropout
    # draws; on a device (as on CUDA) the two streams are separate, so no
    # same-seed run could match the CPU's. Dropout itself stays on.
    layerdrop=0.0,
)
_CONVNEXT = _transformers(
    "ConvNextForImageClassification",
    "ConvNextConfig",
    **_IMAGE_MODEL,
    num_channels=3,
    patch_size=2,
    hidden_sizes=[16, 32],
    depths=[1, 1],
    num_stages=2,
)
_RESNET18 = _torchvision("resnet18", num_classes=10)
_MOBILENET_V3_SMALL = _torchvision("mobilenet_v3_small", num_classes=10)
# Three classes keep random-init scores above the detection threshold, so the
# comparison sees boxes.
_FASTERRCNN = _torchvision(
    "fasterrcnn_mobilenet_v3_large_320_fpn", weights_backbone=None, num_classes=3
)

MODELS: tuple[ZooModel, ...] = (
    ZooModel("gpt2", "transformers", _GPT2, _causal_lm_batch, generates=True),
    ZooModel("bert", "transformers", _BERT, _masked_lm_batch),
    ZooModel("t5", "transformers", _T5, _seq2seq_batch, generates=True),
    ZooModel("vit", "transformers", _VIT, _image_batch),
    ZooModel("llama", "transformers", _LLAMA, _causal_lm_batch, generates=True),
    ZooModel("mixtral", "transformers", _MIXTRAL, _causal_lm_batch, generates=True),
    ZooModel("gemma", "transformers", _GEMMA, _causal_lm_batch, generates=True),
    ZooModel("wav2vec2", "transformers", _WAV2VEC2, _speech_batch),
    ZooModel("convnext", "transformers", _CONVNEXT, _image_batch),
    ZooModel("resnet18", "torchvision", _RESNET18, _vision_batch),
    ZooModel("mobilenet_v3_small", "torchvision", _MOBILENET_V3_SMALL, _vision_batch),
    ZooModel("fasterrcnn_mobilenet_v3", "torchvision", _FASTERRCNN, _detection_batch, trains=False),
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


def _training_step(spec: ZooModel, base: nn.Module, batch: Batch, device: str) -> Candidate:
    model = copy.deepcopy(base).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=FOREACH)
    on_device = to_device(batch, device)

    def step() -> None:
        optimizer.zero_grad()
        spec.loss(model, on_device).backward()
        optimizer.step()

    return Candidate(device, step)


def _steps_per_round(step: Candidate, round_seconds: float) -> int:
    """How many steps fill a round: long enough that scheduler noise averages out,
    short enough that the slow models (resnet18) stay within a few seconds."""
    finish = synchronizer(step.device)
    step.run()
    finish()
    started = time.perf_counter()
    step.run()
    finish()
    return max(2, min(50, math.ceil(round_seconds / (time.perf_counter() - started))))


def _bench_model(
    spec: ZooModel, device: str, rounds: int, round_seconds: float, row: Row
) -> Figure:
    if not available(spec):
        return Figure.failed(row, f"needs {spec.library}, which is not installed")
    try:
        seed_everything(DATA_SEED)
        batch = spec.batch()
        seed_everything(MODEL_SEED)
        base = spec.build()
        on_cpu = _training_step(spec, base, batch, "cpu")
        on_device = _training_step(spec, base, batch, device)
        times = median_rounds(
            {"cpu": on_cpu, device: on_device},
            repeat=_steps_per_round(on_cpu, round_seconds),
            rounds=rounds,
        )
        waits = host_waits_per_step(on_device)
    except Exception as error:
        return Figure.failed(row, error)
    return dataclasses.replace(step_time_figure(row, times, device), host_waits=waits)


def host_waits_per_step(step: Candidate, steps: int = 3) -> tuple[float, float]:
    """How often a step makes the host wait for its device: (requested by the
    step's code, such as item() or a data-dependent shape; implicit, an operator
    that runs on the host waiting for the kernels queued before it)."""
    device_type = torch.device(step.device).type
    synchronizer(step.device)()
    torchplug.runtime.reset_host_synchronizations(device_type)
    for _ in range(steps):
        step.run()
    counts = torchplug.runtime.host_synchronizations(device_type)
    synchronizer(step.device)()
    return counts.requested / steps, counts.implicit / steps


def bench_zoo(
    device: str,
    rounds: int,
    round_seconds: float = 0.15,
    row_of: Callable[[str], Row] = zoo_step,
) -> list[Figure]:
    """One figure per trainable zoo model (its row ``row_of(name)``): its step time
    or why it has none."""
    return [
        _bench_model(spec, device, rounds, round_seconds, row_of(spec.name))
        for spec in MODELS
        if spec.trains
    ]
