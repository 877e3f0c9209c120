"""Random numbers on the device: seeding, state save/restore, generators, forked RNG.

Device streams need not equal the CPU's; they must be reproducible and
well-formed.
"""

import pytest
import torch

DRAWS = {
    "rand": lambda device: torch.rand(1000, device=device),
    "randn": lambda device: torch.randn(1000, device=device),
    "randint": lambda device: torch.randint(0, 10, (1000,), device=device),
    "randperm": lambda device: torch.randperm(50, device=device),
    "bernoulli": lambda device: torch.bernoulli(torch.full((1000,), 0.3, device=device)),
    "normal_": lambda device: torch.empty(1000, device=device).normal_(2.0, 0.5),
    "dropout": lambda device: torch.nn.functional.dropout(torch.ones(1000, device=device), 0.5),
    "multinomial": lambda device: torch.multinomial(
        torch.tensor([0.1, 0.6, 0.3], device=device), 200, replacement=True
    ),
}


@pytest.mark.parametrize("name", DRAWS)
def test_manual_seed_reproduces(device: str, name: str) -> None:
    draw = DRAWS[name]
    torch.manual_seed(123)
    first = draw(device=device)
    torch.manual_seed(123)
    second = draw(device=device)
    assert first.device.type == device
    assert torch.equal(first.cpu(), second.cpu())
    torch.manual_seed(124)
    assert not torch.equal(first.cpu(), draw(device=device).cpu())


def test_distributions_are_well_formed(device: str) -> None:
    torch.manual_seed(0)
    uniform = torch.rand(20000, device=device).cpu()
    assert uniform.min() >= 0
    assert uniform.max() < 1
    assert abs(uniform.mean().item() - 0.5) < 0.02
    normal = torch.randn(20000, device=device).cpu()
    assert abs(normal.mean().item()) < 0.05
    assert abs(normal.std().item() - 1) < 0.05
    assert sorted(torch.randperm(100, device=device).cpu().tolist()) == list(range(100))
    ints = torch.randint(3, 9, (5000,), device=device).cpu()
    assert set(ints.tolist()) == set(range(3, 9))


def test_rng_state_save_and_restore(device: str, device_module) -> None:
    device_module.manual_seed(5)
    state = device_module.get_rng_state()
    first = torch.randn(100, device=device)
    device_module.set_rng_state(state)
    assert torch.equal(torch.randn(100, device=device).cpu(), first.cpu())
    assert device_module.initial_seed() == 5


def test_generator_objects(device: str) -> None:
    generator = torch.Generator(device=device)
    assert generator.device.type == device
    generator.manual_seed(9)
    first = torch.randn(64, device=device, generator=generator)
    generator.manual_seed(9)
    second = torch.randn(64, device=device, generator=generator)
    assert torch.equal(first.cpu(), second.cpu())
    # An explicit generator leaves the default one alone.
    torch.manual_seed(1)
    expected = torch.randn(8, device=device)
    torch.manual_seed(1)
    torch.randn(8, device=device, generator=generator)
    assert torch.equal(torch.randn(8, device=device).cpu(), expected.cpu())


def test_fork_rng_restores_device_state(device: str) -> None:
    torch.manual_seed(11)
    with torch.random.fork_rng(device_type=device):
        torch.randn(10, device=device)
    after_fork = torch.randn(10, device=device)
    torch.manual_seed(11)
    assert torch.equal(after_fork.cpu(), torch.randn(10, device=device).cpu())


def test_devices_have_independent_generators(device: str, second_device: torch.device) -> None:
    first_device = torch.device(device, 0)
    torch.manual_seed(3)
    expected = torch.randn(16, device=first_device)
    torch.manual_seed(3)
    torch.randn(16, device=second_device)  # advances the second device's generator only
    assert torch.equal(torch.randn(16, device=first_device).cpu(), expected.cpu())
