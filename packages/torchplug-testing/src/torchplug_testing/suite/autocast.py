"""Autocast on the device: the same casting decisions and values as CPU autocast."""

import pytest
import torch
from torch.nn import functional

from torchplug_testing.compare import assert_matches_cpu

torch.manual_seed(9)
X = torch.randn(8, 16)
W = torch.randn(4, 16)


def supported(device_module) -> list[torch.dtype]:
    return [
        dtype
        for dtype in device_module.get_amp_supported_dtype()
        if dtype in (torch.float16, torch.bfloat16)
    ]


def autocast_dtypes(device_module) -> list[torch.dtype]:
    dtypes = supported(device_module)
    if not dtypes:
        pytest.skip("the device declares no reduced-precision autocast dtype")
    return dtypes


def run(device_type: str, dtype: torch.dtype, x: torch.Tensor, w: torch.Tensor) -> list:
    with torch.autocast(device_type=device_type, dtype=dtype):
        assert torch.is_autocast_enabled(device_type)
        assert torch.get_autocast_dtype(device_type) == dtype
        projected = functional.linear(x, w)  # lower precision
        summed = projected.float().softmax(-1)  # fp32 ops stay fp32
        mixed = projected + x[:, :4].double()  # promote
        with torch.autocast(device_type=device_type, enabled=False):
            plain = x @ w.t()
    return [projected, summed, mixed, plain]


def test_autocast_matches_cpu(device: str, device_module) -> None:
    for dtype in autocast_dtypes(device_module):
        expected = run("cpu", dtype, X, W)
        actual = run(device, dtype, X.to(device), W.to(device))
        assert [t.dtype for t in actual] == [t.dtype for t in expected], dtype
        assert_matches_cpu(actual, expected, rtol=1e-2, atol=1e-2)
    assert not torch.is_autocast_enabled(device)


def test_autocast_backward(device: str, device_module) -> None:
    dtype = autocast_dtypes(device_module)[0]

    def gradients(on: str) -> list[torch.Tensor]:
        weight = W.to(on).requires_grad_()
        with torch.autocast(device_type=on, dtype=dtype):
            loss = functional.linear(X.to(on), weight).float().pow(2).mean()
        loss.backward()
        return [loss.detach(), weight.grad]

    actual = gradients(device)
    assert actual[1].dtype == torch.float32
    assert_matches_cpu(actual, gradients("cpu"), rtol=2e-2, atol=2e-2)


def test_grad_scaler(device: str, device_module) -> None:
    if torch.float16 not in supported(device_module):
        pytest.skip("GradScaler is for float16 autocast")
    weight = torch.ones(4, device=device, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=1024.0)
    with torch.autocast(device_type=device, dtype=torch.float16):
        loss = (weight * 2).sum()
    scaler.scale(loss).backward()
    assert torch.equal(weight.grad.cpu(), torch.full((4,), 2048.0))
    scaler.step(optimizer)
    scaler.update()
    assert torch.allclose(weight.detach().cpu(), torch.full((4,), 0.8))
    weight.grad = torch.full((4,), float("inf"), device=device)
    scaler.step(optimizer)
    scaler.update()
    assert scaler.get_scale() == 512.0
    assert torch.allclose(weight.detach().cpu(), torch.full((4,), 0.8))
