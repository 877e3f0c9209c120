"""The checks of tests/test_frameworks_lightning.py (see framework_checks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from framework_checks import (
    LIGHTNING_ACCELERATOR,
    DtypeProbe,
    against_cpu,
    batches,
    first_linear,
    mlp,
    scaler_device,
)


def module() -> Any:
    import lightning

    class Classifier(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = mlp()
            self.probe = DtypeProbe(first_linear(self.net))
            self.losses: list[float] = []
            # Lightning moves the model back to the CPU when fit ends: where it trained.
            self.devices: set[str] = set()

        def training_step(self, batch: Any, index: int) -> torch.Tensor:
            inputs, targets = batch
            loss = F.cross_entropy(self.net(inputs), targets)
            self.losses.append(loss.item())
            self.devices.add(str(inputs.device))
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Classifier()


def trainer(accelerator: Any, precision: str) -> Any:
    import lightning

    return lightning.Trainer(
        accelerator=accelerator,
        precision=precision,
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def fit(accelerator: str, precision: str = "32-true") -> dict[str, Any]:
    run = trainer(accelerator, precision)
    model = module()
    data = torch.utils.data.DataLoader(batches(), batch_size=None)
    run.fit(model, data)
    return {
        "device": ",".join(sorted(model.devices)),
        "losses": model.losses,
        "dtype": model.probe.result(),
        "scaler": scaler_device(getattr(run.precision_plugin, "scaler", None)),
    }


def own_accelerator(device: str) -> Any:
    """An accelerator a user writes for the device, registered nowhere."""
    from lightning.pytorch.accelerators import Accelerator

    class Own(Accelerator):
        def setup_device(self, root: torch.device) -> None:
            getattr(torch, device).set_device(root)

        def teardown(self) -> None:
            pass

        @staticmethod
        def parse_devices(devices: Any) -> list[int]:
            return [0]

        @staticmethod
        def get_parallel_devices(devices: list[int]) -> list[torch.device]:
            return [torch.device(device, index) for index in devices]

        @staticmethod
        def auto_device_count() -> int:
            return 1

        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def name() -> str:
            return "own"

    return Own()


def standalone_selects(accelerator: str) -> dict[str, Any]:
    """The same through the standalone pytorch_lightning package."""
    import pytorch_lightning

    run = pytorch_lightning.Trainer(
        accelerator=accelerator, logger=False, enable_progress_bar=False
    )
    return {"device": str(run.strategy.root_device)}


def lightning(device: str) -> dict[str, Callable[[], dict[str, Any]]]:
    accelerator = LIGHTNING_ACCELERATOR[device]
    return {
        "selects": lambda: {"device": str(trainer(accelerator, "32-true").strategy.root_device)},
        "own_accelerator_selects": lambda: {
            "device": str(trainer(own_accelerator(device), "32-true").strategy.root_device)
        },
        "standalone_selects": lambda: standalone_selects(accelerator),
        "fp32": against_cpu(lambda: fit(accelerator), lambda: fit("cpu")),
        "bf16": against_cpu(
            lambda: fit(accelerator, "bf16-mixed"), lambda: fit("cpu", "bf16-mixed")
        ),
        "fp16": against_cpu(lambda: fit(accelerator, "16-mixed"), lambda: fit("cpu")),
    }
