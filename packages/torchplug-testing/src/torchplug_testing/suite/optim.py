"""Optimizers (single-tensor and foreach) and LR schedules: parameters track the CPU."""

import copy

import pytest
import torch
from torch import nn

from torchplug_testing.compare import assert_matches_cpu

OPTIMIZERS = {
    "sgd_momentum": lambda p, foreach: torch.optim.SGD(
        p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3, foreach=foreach
    ),
    "adam": lambda p, foreach: torch.optim.Adam(p, lr=0.01, foreach=foreach),
    "adamw_amsgrad": lambda p, foreach: torch.optim.AdamW(
        p, lr=0.01, amsgrad=True, foreach=foreach
    ),
    "rmsprop": lambda p, foreach: torch.optim.RMSprop(p, lr=0.01, centered=True, foreach=foreach),
    "adagrad": lambda p, foreach: torch.optim.Adagrad(p, lr=0.1, foreach=foreach),
}


def train(model: nn.Module, make_optimizer, foreach: bool, device: str) -> list:
    model = copy.deepcopy(model).to(device)
    optimizer = make_optimizer(model.parameters(), foreach)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    generator = torch.Generator().manual_seed(8)
    for _ in range(4):
        batch = torch.randn(6, 5, generator=generator).to(device)
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()
        schedule.step()
    state = [
        value
        for per_parameter in optimizer.state.values()
        for key, value in sorted(per_parameter.items())
        if key != "step"
    ]
    return [list(model.parameters()), state]


@pytest.mark.parametrize("foreach", [False, True], ids=["single_tensor", "foreach"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer(device: str, name: str, foreach: bool) -> None:
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
    expected = train(model, OPTIMIZERS[name], foreach, "cpu")
    actual = train(model, OPTIMIZERS[name], foreach, device)
    assert_matches_cpu(actual, expected, rtol=1e-5, atol=1e-6)


def test_optimizer_state_dict_round_trip(device: str) -> None:
    model = nn.Linear(3, 3).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(2, 3, device=device)).sum().backward()
    optimizer.step()
    restored = torch.optim.Adam(model.parameters())
    restored.load_state_dict(optimizer.state_dict())
    for state in restored.state.values():
        assert state["exp_avg"].device.type == device
