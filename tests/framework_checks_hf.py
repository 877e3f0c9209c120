"""The checks of tests/test_frameworks_hf.py and test_frameworks_transformers_testing.py:
HF accelerate, the Trainer and transformers' test utilities (see framework_checks)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from framework_checks import DtypeProbe, against_cpu, batches, first_linear, mlp, scaler_device

LEARNING_RATE = 1e-2
VOCAB = 64  # Sentences draws its token ids below it
# One layer, 16 wide: two steps take a moment on the CPU and on a device.
BERT_SIZES = {
    "num_hidden_layers": 1,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_attention_heads": 2,
    "max_position_embeddings": 16,
}
# Dropout draws from each device's own generator: off, so losses compare.
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def bert() -> nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=VOCAB, num_labels=2, **BERT_SIZES, **NO_DROPOUT)
    torch.manual_seed(0)
    return BertForSequenceClassification(config)


class Sentences(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(index)
        return {
            "input_ids": torch.randint(0, VOCAB, (8,), generator=generator),
            "labels": torch.tensor(index % 2),
        }


def trainer(**arguments: Any) -> Any:
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir="trainer",
        per_device_train_batch_size=4,
        max_steps=2,
        logging_steps=1,
        learning_rate=LEARNING_RATE,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        **arguments,
    )
    return Trainer(model=bert(), args=args, train_dataset=Sentences())


def train(**arguments: Any) -> dict[str, Any]:
    run = trainer(**arguments)
    probe = DtypeProbe(first_linear(run.model))
    run.train()
    return {
        "device": str(next(run.model.parameters()).device),
        "losses": [entry["loss"] for entry in run.state.log_history if "loss" in entry],
        "dtype": probe.result(),
        "scaler": scaler_device(run.accelerator.scaler),
    }


def accelerate_loop(cpu: bool = False) -> dict[str, Any]:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = Accelerator(cpu=cpu)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    losses = []
    for inputs, targets in batches():
        loss = F.cross_entropy(model(inputs.to(accelerator.device)), targets.to(accelerator.device))
        optimizer.zero_grad()
        accelerator.backward(loss)
        optimizer.step()
        losses.append(loss.item())
    return {"device": str(next(model.parameters()).device), "losses": losses}


def hf(device: str) -> dict[str, Callable[[], dict[str, Any]]]:
    return {
        "accelerate": against_cpu(accelerate_loop, lambda: accelerate_loop(cpu=True)),
        "trainer_selects": lambda: {"device": str(next(trainer().model.parameters()).device)},
        "trainer_fp32": against_cpu(train, lambda: train(use_cpu=True)),
        "trainer_bf16": against_cpu(
            lambda: train(bf16=True), lambda: train(use_cpu=True, bf16=True)
        ),
        "trainer_fp16": against_cpu(lambda: train(fp16=True), lambda: train(use_cpu=True)),
    }


def tiny_steps(device: str) -> dict[str, Any]:
    """Two steps as a transformers test writes them: seeded through testing_utils."""
    from transformers.testing_utils import backend_manual_seed

    model = bert().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    backend_manual_seed(device, 0)
    data = Sentences()
    losses = []
    for step in range(2):
        batch = [data[index] for index in range(step * 4, step * 4 + 4)]
        loss = model(
            input_ids=torch.stack([item["input_ids"] for item in batch]).to(device),
            labels=torch.stack([item["labels"] for item in batch]).to(device),
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"device": str(next(model.parameters()).device), "losses": losses}


def transformers_testing(device: str) -> dict[str, Callable[[], dict[str, Any]]]:
    if device == "hpu":
        # TRANSFORMERS_TEST_DEVICE=hpu is refused without habana_frameworks: a spec file.
        from torchplug_testing import transformers_spec

        os.environ["TRANSFORMERS_TEST_DEVICE_SPEC"] = transformers_spec.write("hpu").name
    from transformers import testing_utils

    def selects() -> dict[str, Any]:
        chosen = testing_utils.torch_device
        module = getattr(torch, chosen, None)
        skipped = getattr(
            testing_utils.require_torch_accelerator(lambda: None), "__unittest_skip__", False
        )
        return {
            "device": chosen,
            "device_count": testing_utils.backend_device_count(chosen),
            "expected_count": module.device_count() if module else None,
            "seeds_the_device": testing_utils.BACKEND_MANUAL_SEED.get(chosen)
            is getattr(module, "manual_seed", None),
            "accelerator_tests_run": not skipped,
            "bf16": testing_utils.is_torch_bf16_available_on_device(chosen),
            "fp16": testing_utils.is_torch_fp16_available_on_device(chosen),
        }

    return {
        "selects": selects,
        "trains": against_cpu(
            lambda: tiny_steps(testing_utils.torch_device), lambda: tiny_steps("cpu")
        ),
    }
