"""What tests/test_frameworks_*.py check, run in a child interpreter per framework and device.

``main(framework, device, report)`` runs one framework's checks the way a user
would (the child's environment holds whatever setting docs/frameworks.md
gives for that device) and writes, per check, where it ran, the losses of
two training steps next to the CPU's, the activation dtype under mixed
precision and the GradScaler's device, or the error. Models are tiny and
built in code: nothing is downloaded.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

STEPS = 2
BATCH = 4
# Lightning's accelerator argument per device ("auto" needs nothing).
LIGHTNING_ACCELERATOR = {"foo": "auto", "npu": "auto", "hpu": "hpu"}


def integration_modules() -> list[str]:
    return sorted(name for name in sys.modules if name.startswith("torchplug.integrations"))


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (
            torch.randn(BATCH, 8, generator=generator),
            torch.randint(0, 2, (BATCH,), generator=generator),
        )
        for _ in range(STEPS)
    ]


class DtypeProbe:
    """Records the dtype of a module's outputs: bf16/fp16 where autocast reached it."""

    def __init__(self, module: nn.Module) -> None:
        self.dtypes: set[str] = set()
        module.register_forward_hook(lambda _, inputs, output: self.dtypes.add(str(output.dtype)))

    def result(self) -> str:
        return ",".join(sorted(self.dtypes))


def first_linear(model: nn.Module) -> nn.Module:
    return next(module for module in model.modules() if isinstance(module, nn.Linear))


def scaler_device(scaler: Any) -> str | None:
    if scaler is None or not scaler.is_enabled():
        return None
    return str(scaler._device)


def training_loop(
    device: str, dtype: torch.dtype | None = None, scale: bool = False
) -> dict[str, Any]:
    """Two steps of a plain device-generic loop (pytorch/examples style) on ``device``."""
    model = mlp().to(device)
    probe = DtypeProbe(first_linear(model))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(torch.device(device).type) if scale else None
    losses = []
    for inputs, targets in batches():
        with torch.autocast(torch.device(device).type, dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(inputs.to(device)), targets.to(device))
        optimizer.zero_grad()
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        losses.append(loss.item())
    return {
        "device": str(next(model.parameters()).device),
        "losses": losses,
        "dtype": probe.result(),
        "scaler": scaler_device(scaler),
    }


def against_cpu(
    run: Callable[[], dict[str, Any]], cpu: Callable[[], dict[str, Any]]
) -> Callable[[], dict[str, Any]]:
    """A check whose outcome is ``run``'s, with the CPU's losses beside it."""

    def check() -> dict[str, Any]:
        outcome = run()
        outcome["cpu"] = cpu()["losses"]
        return outcome

    return check


# pytorch/examples and torchtitan, as they find the device.


def examples_device() -> str:
    return str(
        torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
    )


def torchtitan_device() -> str:
    from torch._utils import _get_available_device_type, _get_device_module

    device_type = _get_available_device_type() or "cuda"
    device_module = _get_device_module(device_type)
    device_module.set_device(0)
    return f"{device_type}:{device_module.current_device()}"


def scripts(device: str) -> dict[str, Callable[[], dict[str, Any]]]:
    # hpu is never torch.accelerator's device beside a PrivateUse1 backend: name it.
    found = device if device == "hpu" else examples_device()
    return {
        "examples_selects": lambda: {"device": examples_device()},
        "torchtitan_selects": lambda: {"device": torchtitan_device()},
        "fp32": against_cpu(lambda: training_loop(found), lambda: training_loop("cpu")),
        "bf16": against_cpu(
            lambda: training_loop(found, torch.bfloat16),
            lambda: training_loop("cpu", torch.bfloat16),
        ),
        "fp16": against_cpu(
            lambda: training_loop(found, torch.float16, scale=True), lambda: training_loop("cpu")
        ),
        "import_torch_loads_no_integration": lambda: {"loaded": integration_modules()},
    }


def main(framework: str, device: str, report: Path) -> None:
    before = integration_modules()
    # Each framework's checks live in their own module, imported only by its child.
    module, function = {
        "scripts": ("framework_checks", "scripts"),
        "hf": ("framework_checks_hf", "hf"),
        "transformers_testing": ("framework_checks_hf", "transformers_testing"),
        "lightning": ("framework_checks_lightning", "lightning"),
    }[framework]
    outcomes: dict[str, Any] = {"integrations_before_framework": before}
    started_in = Path.cwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)  # Trainer outputs, device spec files
        checks = getattr(importlib.import_module(module), function)(device)
        for name, check in checks.items():
            try:
                outcomes[name] = {**check(), "error": None}
            except Exception:
                outcomes[name] = {"error": traceback.format_exc()}
        os.chdir(started_in)
    outcomes["integrations_after_framework"] = integration_modules()
    report.write_text(json.dumps(outcomes))
