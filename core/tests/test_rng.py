"""Seeding, forking and restoring the device RNG, as torch.cuda users rely on."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from device_matrix import active_devices, rerun_as_owner
from torchplug_testing.child import child_environment, run_python

DEVICES = active_devices()

DRAWS = """
import torch
torch.manual_seed(1234)
a = torch.rand(4, device="foo:0")
b = torch.randn(4, device="foo:1")
c = torch.nn.functional.dropout(torch.ones(8, device="foo"), 0.5)
print(a.tolist(), b.tolist(), c.tolist())
"""


def _draws() -> str:
    result = run_python(DRAWS, child_environment(), timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_same_seed_same_numbers_across_processes() -> None:
    first, second = _draws(), _draws()
    assert first == second


@pytest.mark.parametrize("device", DEVICES)
def test_manual_seed_seeds_every_device_like_the_cpu(device: str) -> None:
    torch.manual_seed(99)
    on_devices = [torch.rand(5, device=f"{device}:{i}").cpu() for i in range(2)]
    torch.manual_seed(99)
    on_cpu = torch.rand(5)
    for drawn in on_devices:
        assert torch.equal(drawn, on_cpu)


def test_fork_rng_restores_the_device_state(device: str) -> None:
    torch.manual_seed(5)
    with torch.random.fork_rng(devices=[0], device_type=device):
        inside = torch.rand(3, device=device)
    after = torch.rand(3, device=device)
    torch.manual_seed(5)
    assert torch.equal(after.cpu(), torch.rand(3, device=device).cpu())
    assert torch.equal(inside.cpu(), after.cpu())


def test_rng_state_round_trip(device: str) -> None:
    state = torch.foo.get_rng_state()
    first = torch.randn(4, device=device)
    torch.foo.set_rng_state(state)
    assert torch.equal(torch.randn(4, device=device).cpu(), first.cpu())


def test_explicit_device_generator(device: str) -> None:
    generator = torch.Generator(device=device).manual_seed(3)
    drawn = torch.rand(4, device=device, generator=generator)
    generator.manual_seed(3)
    assert torch.equal(torch.rand(4, device=device, generator=generator).cpu(), drawn.cpu())


def test_dropout_is_reproducible(device: str) -> None:
    x = torch.ones(64, device=device)
    torch.manual_seed(0)
    first = F.dropout(x, 0.3)
    torch.manual_seed(0)
    assert torch.equal(F.dropout(x, 0.3).cpu(), first.cpu())
    assert 0 < int((first == 0).sum()) < 64


def test_dropout_draws_from_the_device_generator(device: str) -> None:
    """native_dropout has no generator argument; on the device it must still
    draw from the device's generator, not the CPU's, as on CUDA."""
    module = torch.get_device_module(device)
    x = torch.ones(256, device=device)
    masks = []
    for cpu_seed in (1, 2):
        torch.manual_seed(cpu_seed)
        module.manual_seed(7)
        masks.append(F.dropout(x, 0.5).cpu())
    assert torch.equal(masks[0], masks[1])
    module.manual_seed(8)
    assert not torch.equal(F.dropout(x, 0.5).cpu(), masks[0])


def test_initialized_flag_reads_like_cudas(device: str) -> None:
    torch.ones(1, device=device)
    assert torch.get_device_module(device)._initialized is True


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_replays_dropout_with_preserved_rng(device: str, use_reentrant: bool) -> None:
    layer = torch.nn.Linear(16, 16).to(device)
    x = torch.randn(8, 16, device=device, requires_grad=True)

    def block(t: torch.Tensor) -> torch.Tensor:
        return F.dropout(layer(t), 0.5, training=True)

    torch.manual_seed(11)
    checkpoint(block, x, use_reentrant=use_reentrant, preserve_rng_state=True).sum().backward()
    recomputed = x.grad.clone()
    x.grad = None
    torch.manual_seed(11)
    block(x).sum().backward()
    assert torch.equal(recomputed.cpu(), x.grad.cpu())


def random_operator_draws(device: str) -> list[torch.Tensor]:
    x = torch.randn(6, 6, device=device)
    attention = torch.nn.MultiheadAttention(6, 2, dropout=0.5).to(device)
    query = torch.randn(3, 1, 6, device=device)
    return [
        x,
        F.rrelu(x, training=True),
        F.fractional_max_pool3d(torch.randn(1, 1, 6, 6, 6, device=device), 2, output_size=3),
        attention(query, query, query)[0],
        torch.bernoulli(torch.full((16,), 0.5, device=device)),
        torch.randperm(10, device=device),
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_random_operators_follow_torch_manual_seed(device: str) -> None:
    torch.manual_seed(7)
    first = [t.cpu() for t in random_operator_draws(device)]
    torch.seed()
    torch.manual_seed(7)
    again = [t.cpu() for t in random_operator_draws(device)]
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b)


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")


WITHOUT_SEED_HOOK = """
import os
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
import torch.random
del torch.random._seed_custom_device  # as in a torch release that drops it
import torch
import vhabana_frameworks.torch
print(torch.hpu.is_available(), torch.ones(2, device="hpu").sum().item())
"""


def test_a_torch_without_the_seed_hook_keeps_hpu_working_and_says_so() -> None:
    result = run_python(WITHOUT_SEED_HOOK, child_environment(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "2.0"]
    assert "no torch.random._seed_custom_device" in result.stderr
    assert "call torch.hpu.manual_seed" in result.stderr
