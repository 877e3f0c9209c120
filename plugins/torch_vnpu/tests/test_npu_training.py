"""Real workloads on npu give the CPU's results: compiled MLP, a small Transformer LM."""

import contextlib

import torch
from torch import nn

VOCAB, WIDTH, HEADS, LAYERS, CONTEXT, BATCH = 50, 32, 4, 2, 12, 8


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)
    )


def mlp_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    loss = nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    return loss


def test_compiled_mlp_matches_eager(npu: str) -> None:
    torch.manual_seed(0)
    eager = mlp().npu()
    compiled_model = mlp().npu()
    compiled_model.load_state_dict(eager.state_dict())
    inputs = torch.randn(64, 16).npu()
    targets = torch.randint(0, 4, (64,)).npu()
    compiled = torch.compile(compiled_model, backend="aot_eager")
    loss = mlp_step(compiled, inputs, targets)
    expected = mlp_step(eager, inputs, targets)
    assert loss.is_npu
    torch.testing.assert_close(loss, expected)
    for (name, parameter), reference in zip(
        compiled_model.named_parameters(), eager.parameters(), strict=True
    ):
        assert parameter.grad is not None, name
        torch.testing.assert_close(parameter.grad, reference.grad)


class TinyLM(nn.Module):
    """Token embedding, learned positions, a 2-layer Transformer encoder, an LM head."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Parameter(torch.randn(CONTEXT, WIDTH) * 0.02)
        layer = nn.TransformerEncoderLayer(
            WIDTH, HEADS, dim_feedforward=4 * WIDTH, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(
            tokens.shape[1], device=tokens.device
        )
        hidden = self.tokens(tokens) + self.positions[: tokens.shape[1]]
        return self.head(self.encoder(hidden, mask=causal, is_causal=True))


def train_lm(
    device: str, autocast_dtype: torch.dtype | None = None, steps: int = 20
) -> list[float]:
    torch.manual_seed(0)
    model = TinyLM()
    data = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1))
    model.to(device)
    data = data.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    autocast = (
        torch.autocast(device, dtype=autocast_dtype)
        if autocast_dtype is not None
        else contextlib.nullcontext()
    )
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with autocast:
            logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(
            logits.float().reshape(-1, VOCAB), data[:, 1:].reshape(-1)
        )
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_transformer_lm_trains_like_cpu(npu: str) -> None:
    cpu = train_lm("cpu")
    on_npu = train_lm("npu")
    assert cpu[-1] < 0.7 * cpu[0]  # it really learns
    torch.testing.assert_close(on_npu, cpu, rtol=1e-5, atol=1e-5)


def test_transformer_lm_under_bf16_autocast_tracks_cpu_autocast(npu: str) -> None:
    cpu = train_lm("cpu", torch.bfloat16)
    on_npu = train_lm("npu", torch.bfloat16)
    full_precision = train_lm("cpu")
    assert cpu != full_precision  # autocast really lowered the precision
    torch.testing.assert_close(on_npu, cpu, rtol=2e-2, atol=2e-2)
