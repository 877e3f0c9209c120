"""torch.autocast and GradScaler on a simulated device follow CUDA's policies."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

LOW = "low"  # the autocast dtype
FP32 = "fp32"
KEEP = "keep"  # no policy: the op runs in its inputs' dtype


def _inputs(device: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """float32 inputs, and the same in the autocast dtype under upper-case names."""
    torch.manual_seed(0)
    tensors = {
        "a": torch.randn(4, 4, device=device),
        "b": torch.randn(2, 4, 4, device=device),
        "v": torch.randn(4, device=device),
        "img": torch.randn(1, 2, 5, 5, device=device),
        "w": torch.randn(3, 2, 3, 3, device=device),
        "pos": torch.rand(4, 4, device=device) + 0.5,
    }
    tensors.update({name.upper(): value.to(dtype) for name, value in tensors.items()})
    return tensors


# (name, op, expected policy).
CASES: list[tuple[str, Callable[[dict[str, torch.Tensor]], torch.Tensor], str]] = [
    ("mm", lambda t: torch.mm(t["a"], t["a"]), LOW),
    ("matmul", lambda t: t["a"] @ t["a"], LOW),
    ("addmm", lambda t: torch.addmm(t["a"], t["a"], t["a"]), LOW),
    ("bmm", lambda t: torch.bmm(t["b"], t["b"]), LOW),
    ("baddbmm", lambda t: torch.baddbmm(t["b"], t["b"], t["b"]), LOW),
    ("addbmm", lambda t: torch.addbmm(t["a"], t["b"], t["b"]), LOW),
    ("addmv", lambda t: torch.addmv(t["v"], t["a"], t["v"]), LOW),
    ("mv", lambda t: torch.mv(t["a"], t["v"]), LOW),
    ("linear", lambda t: F.linear(t["a"], t["a"], t["v"]), LOW),
    ("einsum", lambda t: torch.einsum("ij,jk->ik", t["a"], t["a"]), LOW),
    ("conv2d", lambda t: F.conv2d(t["img"], t["w"]), LOW),
    ("prelu", lambda t: F.prelu(t["a"], torch.ones(1, device=t["a"].device)), LOW),
    ("exp", lambda t: torch.exp(t["A"]), FP32),
    ("log", lambda t: torch.log(t["POS"]), FP32),
    ("pow", lambda t: torch.pow(t["A"], 2), FP32),
    ("rsqrt", lambda t: torch.rsqrt(t["POS"]), FP32),
    ("softmax", lambda t: torch.softmax(t["A"], 0), FP32),
    ("log_softmax", lambda t: F.log_softmax(t["A"], 0), FP32),
    ("sum", lambda t: t["A"].sum(), FP32),
    ("cumsum", lambda t: torch.cumsum(t["A"], 0), FP32),
    ("prod", lambda t: t["POS"].prod(), FP32),
    ("layer_norm", lambda t: F.layer_norm(t["A"], (4,)), FP32),
    ("group_norm", lambda t: F.group_norm(t["IMG"], 1), FP32),
    ("norm", lambda t: torch.norm(t["A"]), FP32),
    ("mse_loss", lambda t: F.mse_loss(t["A"], t["POS"]), FP32),
    ("l1_loss", lambda t: F.l1_loss(t["A"], t["POS"]), FP32),
    (
        "nll_loss",
        lambda t: F.nll_loss(t["A"], torch.zeros(4, dtype=torch.long, device=t["a"].device)),
        FP32,
    ),
    (
        "bce_with_logits",
        lambda t: F.binary_cross_entropy_with_logits(t["A"], t["POS"] / 2),
        FP32,
    ),
    ("logsumexp", lambda t: torch.logsumexp(t["A"], 0), FP32),
    ("cdist", lambda t: torch.cdist(t["A"], t["A"]), FP32),
    ("addcmul", lambda t: torch.addcmul(t["a"], t["A"], t["A"]), FP32),
    ("atan2", lambda t: torch.atan2(t["A"], t["a"]), FP32),
    ("dot", lambda t: torch.dot(t["V"], t["v"]), FP32),
    ("cat", lambda t: torch.cat([t["A"], t["a"]]), FP32),
    ("stack", lambda t: torch.stack([t["A"], t["a"]]), FP32),
    (
        "index_put",
        lambda t: t["a"].index_put(
            (torch.tensor([0, 1], device=t["a"].device),), t["V"][:2].unsqueeze(1)
        ),
        FP32,
    ),
    ("relu", lambda t: torch.relu(t["a"]), KEEP),
    ("add", lambda t: t["A"] + t["A"], KEEP),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("name", "op", "policy"), CASES, ids=[c[0] for c in CASES])
def test_output_dtype_follows_cuda_policy(
    device: str, dtype: torch.dtype, name: str, op: Callable, policy: str
) -> None:
    tensors = _inputs(device, dtype)
    with torch.autocast(device, dtype=dtype):
        out = op(tensors)
    if policy == LOW:
        assert out.dtype == dtype, name
    elif policy == FP32:
        assert out.dtype == torch.float32, name
    else:
        assert out.dtype == op(tensors).dtype, name
    assert out.device.type == device


def test_lower_precision_result_equals_cpu(device: str) -> None:
    a = torch.randn(8, 8)
    with torch.autocast(device, dtype=torch.bfloat16):
        on_device = (a.to(device) @ a.to(device)).cpu()
    torch.testing.assert_close(on_device, a.bfloat16() @ a.bfloat16(), rtol=0, atol=0)


def test_double_and_integer_inputs_are_left_alone(device: str) -> None:
    a = torch.randn(3, 3, dtype=torch.float64, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.float64
        assert torch.softmax(a, 0).dtype == torch.float64


def test_disabled_autocast_changes_nothing(device: str) -> None:
    a = torch.randn(3, 3, device=device)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=False):
        assert (a @ a).dtype == torch.float32


def test_default_autocast_dtype_is_float16_like_cuda(device: str) -> None:
    a = torch.randn(3, 3, device=device)
    with torch.autocast(device):
        assert (a @ a).dtype == torch.float16


def test_binary_cross_entropy_is_refused_with_the_fix(device: str) -> None:
    p = torch.rand(4, device=device)
    with (
        torch.autocast(device, dtype=torch.bfloat16),
        pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"),
    ):
        F.binary_cross_entropy(p, p)


def test_casts_flow_through_autograd(device: str) -> None:
    w = torch.randn(4, 4, device=device, requires_grad=True)
    x = torch.randn(2, 4, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        y = x @ w
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert w.grad is not None
    assert w.grad.dtype == torch.float32


def _train(device: str, steps: int = 6) -> list[float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 8, generator=generator).to(device)
        target = torch.randn(16, 4, generator=generator).to(device)
        optimizer.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.mse_loss(model(x), target)
        assert loss.dtype == torch.float32
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


def test_training_with_autocast_and_grad_scaler_matches_cpu(device: str) -> None:
    on_device = _train(device)
    on_cpu = _train("cpu")
    assert on_device[-1] < on_device[0]
    torch.testing.assert_close(on_device, on_cpu, rtol=1e-2, atol=1e-3)


def test_grad_scaler_skips_steps_with_non_finite_gradients(device: str) -> None:
    weight = torch.nn.Parameter(torch.ones(2, device=device))
    optimizer = torch.optim.SGD([weight], lr=1.0)
    scaler = torch.amp.GradScaler(device, init_scale=8.0)
    scaler.scale((weight * torch.tensor([float("inf"), 1.0], device=device)).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    assert weight.detach().cpu().tolist() == [1.0, 1.0]  # the step was skipped
    assert scaler.get_scale() == 4.0  # and the scale backed off
    optimizer.zero_grad()
    scaler.scale((weight * 2).sum()).backward()
    assert weight.grad.cpu().tolist() == [8.0, 8.0]  # scaled by 4
    scaler.step(optimizer)  # unscales to 2.0 before stepping
    assert weight.detach().cpu().tolist() == [-1.0, -1.0]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_cpu_without_warnings(device: str, reduction: str) -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        on_device = F.mse_loss(a.to(device), b.to(device), reduction=reduction)
    torch.testing.assert_close(
        on_device.cpu(), F.mse_loss(a, b, reduction=reduction), rtol=0, atol=0
    )
