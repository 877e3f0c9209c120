"""torch.compile with Inductor: compiled code on the device matches compiled code on the CPU."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


def _pointwise_reduction_matmul(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x @ x.T).softmax(-1) + x.sin().sum(0, keepdim=True)


def test_compiled_function_matches_cpu(device: str) -> None:
    x = torch.randn(16, 16)
    compiled = torch.compile(_pointwise_reduction_matmul)
    expected = compiled(x)
    result = compiled(x.to(device))
    assert result.device.type == device
    torch.testing.assert_close(result.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_compiled_inference_matches_eager_cpu(device: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).eval()
    model = nn.Sequential(model, nn.Flatten(), nn.Linear(8 * 8 * 8, 4), nn.LayerNorm(4)).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected = model(x)
        result = torch.compile(copy.deepcopy(model).to(device))(x.to(device))
    torch.testing.assert_close(result.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_compiled_training_step_matches_compiled_cpu(device: str) -> None:
    def losses(target: str) -> list[float]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2)).to(target)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        @torch.compile
        def step(x: torch.Tensor) -> torch.Tensor:
            loss = model(x).pow(2).mean()
            loss.backward()
            return loss.detach()

        generator = torch.Generator().manual_seed(1)
        values = []
        for _ in range(3):
            values.append(step(torch.randn(4, 8, generator=generator).to(target)).item())
            optimizer.step()
            optimizer.zero_grad()
        return values

    expected = losses("cpu")
    torch._dynamo.reset()
    assert losses(device) == pytest.approx(expected, abs=1e-5)


def test_a_graph_is_compiled_per_device(device: str) -> None:
    compiled = torch.compile(_pointwise_reduction_matmul)
    x = torch.randn(8, 8)
    for target in (device, "cpu", device):
        result = compiled(x.to(target))
        assert result.device.type == torch.device(target).type
        torch.testing.assert_close(result.cpu(), _pointwise_reduction_matmul(x))
