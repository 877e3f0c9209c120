"""nn modules and losses: forward outputs, gradients and buffers match the CPU."""

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional

from torchplug_testing.compare import assert_matches_cpu

MODULES = {
    "linear": (lambda: nn.Linear(6, 4), (3, 6)),
    "conv2d": (lambda: nn.Conv2d(3, 4, 3, padding=1, stride=2), (2, 3, 8, 8)),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 4, 4)),
    "batchnorm_train": (lambda: nn.BatchNorm2d(3), (4, 3, 5, 5)),
    "layernorm": (lambda: nn.LayerNorm(6), (3, 4, 6)),
    "groupnorm": (lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    "maxpool_avgpool": (lambda: nn.Sequential(nn.MaxPool2d(2), nn.AvgPool2d(2)), (2, 3, 8, 8)),
    "lstm": (lambda: nn.LSTM(5, 4, num_layers=2, batch_first=True), (2, 3, 5)),
    "gru": (lambda: nn.GRU(5, 4), (3, 2, 5)),
    "multihead_attention": (lambda: MultiheadSelfAttention(8, 2), (2, 5, 8)),
    "transformer_layer": (
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        (2, 5, 8),
    ),
    "activations": (
        lambda: nn.Sequential(
            nn.GELU(), nn.SiLU(), nn.Softplus(), nn.LeakyReLU(0.1), nn.Softmax(-1)
        ),
        (3, 7),
    ),
}


class MultiheadSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x, need_weights=True)[0]


def outputs_and_gradients(module: nn.Module, batch: torch.Tensor) -> list:
    batch = batch.clone().requires_grad_()
    output = module(batch)
    output = output[0] if isinstance(output, tuple) else output
    output.pow(2).sum().backward()
    return [
        output.detach(),
        batch.grad,
        {name: p.grad for name, p in module.named_parameters()},
        {name: b for name, b in module.named_buffers()},
    ]


@pytest.mark.parametrize("name", MODULES)
def test_module(device: str, name: str) -> None:
    build, shape = MODULES[name]
    torch.manual_seed(4)
    module = build()
    batch = torch.randn(shape)
    on_device = copy.deepcopy(module).to(device)
    assert all(p.device.type == device for p in on_device.parameters())
    expected = outputs_and_gradients(module, batch)
    actual = outputs_and_gradients(on_device, batch.to(device))
    assert_matches_cpu(actual, expected, rtol=1e-4, atol=1e-5)


def test_embedding_and_eval_dropout(device: str) -> None:
    torch.manual_seed(5)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Dropout(0.5)).eval()
    tokens = torch.tensor([[1, 9, 3], [0, 0, 7]])
    expected = model(tokens)
    actual = copy.deepcopy(model).to(device)(tokens.to(device))
    assert_matches_cpu(actual, expected)


LOSSES = {
    "mse": (
        functional.mse_loss,
        lambda g: (torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)),
    ),
    "l1": (
        functional.l1_loss,
        lambda g: (torch.randn(6, generator=g), torch.randn(6, generator=g)),
    ),
    "smooth_l1": (
        functional.smooth_l1_loss,
        lambda g: (torch.randn(6, generator=g), torch.randn(6, generator=g)),
    ),
    "cross_entropy": (
        lambda x, t: functional.cross_entropy(x, t, label_smoothing=0.1),
        lambda g: (torch.randn(5, 4, generator=g), torch.tensor([0, 3, 1, 1, 2])),
    ),
    "nll_weighted": (
        lambda x, t: functional.nll_loss(
            x.log_softmax(1), t, weight=torch.tensor([1.0, 2.0, 0.5]).to(x.device)
        ),
        lambda g: (torch.randn(4, 3, generator=g), torch.tensor([2, 0, 1, 2])),
    ),
    "bce_with_logits": (
        functional.binary_cross_entropy_with_logits,
        lambda g: (torch.randn(8, generator=g), torch.rand(8, generator=g)),
    ),
    "kl_div": (
        lambda x, t: functional.kl_div(x.log_softmax(-1), t.softmax(-1), reduction="batchmean"),
        lambda g: (torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)),
    ),
    "huber_sum": (
        lambda x, t: functional.huber_loss(x, t, reduction="sum", delta=0.5),
        lambda g: (torch.randn(7, generator=g), torch.randn(7, generator=g)),
    ),
}


@pytest.mark.parametrize("name", LOSSES)
def test_loss(device: str, name: str) -> None:
    loss_function, make = LOSSES[name]
    prediction, target = make(torch.Generator().manual_seed(6))

    def run(x: torch.Tensor, t: torch.Tensor) -> list[torch.Tensor]:
        x = x.clone().requires_grad_()
        loss = loss_function(x, t)
        loss.backward()
        return [loss.detach(), x.grad]

    expected = run(prediction, target)
    actual = run(prediction.to(device), target.to(device))
    assert_matches_cpu(actual, expected, rtol=1e-5, atol=1e-6)
