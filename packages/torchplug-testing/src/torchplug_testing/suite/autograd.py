"""Autograd on the device: gradients, double backward, hooks and checkpointing match the CPU."""

import torch
import torch.utils.checkpoint

from torchplug_testing.compare import assert_matches_cpu


def leaves(device: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, generator=generator)
    w = torch.randn(5, 3, generator=generator)
    if device is not None:
        x, w = x.to(device), w.to(device)
    return x.requires_grad_(), w.requires_grad_()


def test_backward_matches_cpu(device: str) -> None:
    def gradients(on: str | None) -> list[torch.Tensor]:
        x, w = leaves(on)
        loss = (torch.tanh(x @ w) * torch.arange(3.0, device=x.device)).pow(2).mean()
        loss.backward()
        assert x.grad.device == x.device
        return [x.grad, w.grad, loss.detach()]

    assert_matches_cpu(gradients(device), gradients(None))


def test_double_backward(device: str) -> None:
    def second_order(on: str | None) -> list[torch.Tensor]:
        x, w = leaves(on)
        y = torch.sigmoid(x @ w).sum()
        (grad_x,) = torch.autograd.grad(y, x, create_graph=True)
        (grad_grad_w,) = torch.autograd.grad(grad_x.pow(2).sum(), w)
        return [grad_x.detach(), grad_grad_w]

    assert_matches_cpu(second_order(device), second_order(None))


def test_gradient_accumulation_and_retain_graph(device: str) -> None:
    def accumulated(on: str | None) -> torch.Tensor:
        x, _ = leaves(on)
        y = (x * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        return x.grad

    assert_matches_cpu(accumulated(device), accumulated(None))


def test_hooks_and_retain_grad(device: str) -> None:
    def hooked(on: str | None) -> list[torch.Tensor]:
        x, w = leaves(on)
        hidden = x @ w
        hidden.retain_grad()
        hidden.register_hook(lambda grad: grad * 2)
        hidden.relu().sum().backward()
        return [hidden.grad, x.grad, w.grad]

    assert_matches_cpu(hooked(device), hooked(None))


def test_custom_function(device: str) -> None:
    class ClampedExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = x.exp().clamp(max=3)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad):
            (result,) = ctx.saved_tensors
            return grad * result * (result < 3)

    def run(on: str | None) -> list[torch.Tensor]:
        x, _ = leaves(on)
        ClampedExp.apply(x).sum().backward()
        return [x.grad]

    assert_matches_cpu(run(device), run(None))


def test_no_grad_and_inference_mode(device: str) -> None:
    x, w = leaves(device)
    with torch.no_grad():
        assert not (x @ w).requires_grad
    with torch.inference_mode():
        assert (x @ w).is_inference()
    detached = x.detach()
    assert not detached.requires_grad
    assert detached.data_ptr() == x.data_ptr()


def test_checkpoint_matches_plain_backward(device: str) -> None:
    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(torch.tanh(x @ w), p=0.0) * 2

    def run(use_checkpoint: bool) -> list[torch.Tensor]:
        x, w = leaves(device)
        if use_checkpoint:
            out = torch.utils.checkpoint.checkpoint(block, x, w, use_reentrant=False)
        else:
            out = block(x, w)
        out.sum().backward()
        return [x.grad, w.grad]

    assert_matches_cpu(run(True), run(False))
    x_cpu, w_cpu = leaves()
    block(x_cpu, w_cpu).sum().backward()
    assert_matches_cpu(run(True), [x_cpu.grad, w_cpu.grad])
