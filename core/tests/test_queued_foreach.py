"""The optimizers' foreach operators queue one kernel per call over the whole
tensor list on a device whose memory is host memory, and give the CPU's values
bit for bit; calls the kernel does not cover take torch's per-tensor path and
raise torch's errors at the call.

`torch.foo._sleep(ms)` keeps the stream busy, so a queued kernel is still
pending when its call returns; the tests observe that through stream queries.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch

LONG_MS = 200
SHAPES = [(3, 5), (7,), (2, 3, 4), (1,)]


def _lists(count: int, seed: int = 0) -> list[list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [
        [torch.rand(shape, generator=generator) + 0.5 for shape in SHAPES] for _ in range(count)
    ]


# Each foreach call the AdamW and SGD steps make, by overload: in place on the
# first list, or returning new tensors.
CALLS: dict[str, tuple[int, Callable]] = {
    "add_.Scalar": (1, lambda a: torch._foreach_add_(a, 0.25)),
    "add_.ScalarList": (1, lambda a: torch._foreach_add_(a, [0.5, -1.0, 2.0, 3.0])),
    "add_.List": (2, lambda a, b: torch._foreach_add_(a, b, alpha=-0.3)),
    "mul_.Scalar": (1, lambda a: torch._foreach_mul_(a, 0.9)),
    "mul_.ScalarList": (1, lambda a: torch._foreach_mul_(a, [0.5, 1.5, 2.0, -1.0])),
    "mul.Scalar": (1, lambda a: torch._foreach_mul(a, 0.7)),
    "div_.Scalar": (1, lambda a: torch._foreach_div_(a, 3.0)),
    "div_.ScalarList": (1, lambda a: torch._foreach_div_(a, [3.0, 0.5, 7.0, 1.25])),
    "lerp_.Scalar": (2, lambda a, b: torch._foreach_lerp_(a, b, 0.1)),
    "addcmul_.Scalar": (3, lambda a, b, c: torch._foreach_addcmul_(a, b, c, value=0.01)),
    "addcmul_.ScalarList": (
        3,
        lambda a, b, c: torch._foreach_addcmul_(a, b, c, [1.0, 2.0, 3.0, 4.0]),
    ),
    "addcdiv_.Scalar": (3, lambda a, b, c: torch._foreach_addcdiv_(a, b, c, value=-0.02)),
    "addcdiv_.ScalarList": (
        3,
        lambda a, b, c: torch._foreach_addcdiv_(a, b, c, [0.1, 0.2, 0.3, 0.4]),
    ),
    "sqrt_": (1, lambda a: torch._foreach_sqrt_(a)),
    "sqrt": (1, lambda a: torch._foreach_sqrt(a)),
}


@pytest.mark.parametrize("name", CALLS)
def test_a_foreach_call_is_one_queued_kernel_with_the_cpus_values(device: str, name: str) -> None:
    count, call = CALLS[name]
    on_cpu = _lists(count)
    on_device = [[tensor.to(device) for tensor in tensors] for tensors in on_cpu]
    expected = call(*on_cpu)
    torch.foo.synchronize()
    torch.foo._sleep(LONG_MS)
    result = call(*on_device)
    assert not torch.foo.current_stream().query()  # returned with its kernel queued
    if expected is None:  # in place: the first list holds the results
        expected, result = on_cpu[0], on_device[0]
    assert [tensor.device.type for tensor in result] == [device] * len(SHAPES)
    for got, want in zip(result, expected, strict=True):
        assert torch.equal(got.cpu(), want)


def test_the_adamw_foreach_step_matches_the_cpus_bit_for_bit(device: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    on_device = copy.deepcopy(model).to(device)
    optimizers = [
        torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.1, foreach=True)
        for net in (model, on_device)
    ]
    inputs, targets = torch.randn(32, 8), torch.randint(0, 3, (32,))
    for _ in range(3):
        for net, optimizer, where in zip(
            (model, on_device), optimizers, ("cpu", device), strict=True
        ):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(inputs.to(where)), targets.to(where))
            loss.backward()
            optimizer.step()
    for want, got in zip(model.parameters(), on_device.parameters(), strict=True):
        assert torch.equal(got.detach().cpu(), want.detach())


def test_a_call_across_devices_raises_torchs_error_at_the_call(device: str) -> None:
    on_device = [torch.ones(3, device=device)]
    on_host = [torch.ones(3)]
    torch.foo._sleep(1)  # a busy stream: a covered call would queue
    with pytest.raises(RuntimeError, match="same device"):
        torch._foreach_add_(on_device, on_host)
    torch.foo.synchronize()


def test_lists_of_different_lengths_raise_torchs_error_at_the_call(device: str) -> None:
    tensors = [torch.ones(3, device=device), torch.ones(2, device=device)]
    torch.foo._sleep(1)
    with pytest.raises(RuntimeError, match="same number of elements"):
        torch._foreach_mul_(tensors, [1.0])
    torch.foo.synchronize()


def test_a_broadcast_operand_takes_the_per_tensor_path_with_the_cpus_values(device: str) -> None:
    first = [torch.rand(4, 3), torch.rand(2)]
    second = [torch.rand(3), torch.rand(1)]  # broadcast into the first list's tensors
    expected = [tensor.clone() for tensor in first]
    torch._foreach_add_(expected, second)
    on_device = [tensor.to(device) for tensor in first]
    torch.foo._sleep(1)
    torch._foreach_add_(on_device, [tensor.to(device) for tensor in second])
    for got, want in zip(on_device, expected, strict=True):
        assert torch.equal(got.cpu(), want)


def test_new_results_reuse_no_memory_freed_after_the_launch(device: str) -> None:
    """A queued call that returns new tensors computes them where they are:
    memory the program frees after the launch may still be read by kernels
    queued before the free, and must not be handed to the queued call."""
    a = [torch.rand(4096).to(device)]
    b_on_cpu = torch.rand(4096)
    b = b_on_cpu.to(device)
    torch.foo.synchronize()
    torch.foo._sleep(LONG_MS)
    roots = torch._foreach_sqrt(a)
    doubled = b * 2  # queued after the square roots, reads b
    del b  # its memory is free for work queued from now on
    assert torch.equal(doubled.cpu(), b_on_cpu * 2)
    assert torch.equal(roots[0].cpu(), torch.sqrt(a[0].cpu()))


@pytest.mark.parametrize("name", ["sqrt", "mul.Scalar"])
def test_new_results_of_strided_tensors_keep_their_layout_and_the_cpus_values(
    device: str, name: str
) -> None:
    _, call = CALLS[name]
    generator = torch.Generator().manual_seed(3)
    on_cpu = [
        torch.rand(6, 4, generator=generator).t(),
        torch.rand(3, 5, 2, generator=generator).permute(2, 0, 1),
    ]
    on_device = [tensor.to(device) for tensor in on_cpu]
    expected = call(on_cpu)
    torch.foo.synchronize()
    torch.foo._sleep(LONG_MS)
    result = call(on_device)
    assert not torch.foo.current_stream().query()
    for got, want in zip(result, expected, strict=True):
        assert got.stride() == want.stride()
        assert torch.equal(got.cpu(), want)
