"""torch.compile's default backend (Inductor) keeps the vendor operators whole."""

import torch

import torch_vnpu

EPS = 1e-5


def _block(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch_vnpu.fast_gelu(torch_vnpu.rms_norm(x, weight, EPS) * 2).sum()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 24, generator=generator)
    weight = torch.rand(24, generator=generator) + 0.5
    return x.to("npu").requires_grad_(), weight.to("npu").requires_grad_()


def test_inductor_calls_the_vendor_kernels_as_single_nodes(npu: str) -> None:
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(_block)(*_inputs())
    assert explanation.graph_break_count == 0
    vendor_calls = [
        node.target
        for graph in explanation.graphs
        for node in graph.graph.nodes
        if node.op == "call_function" and "npu." in str(node.target)
    ]
    assert len(vendor_calls) == 2, vendor_calls

    from torch._inductor.utils import run_and_get_code

    x, weight = _inputs()
    compiled = torch.compile(_block, fullgraph=True)
    loss, (code, *_) = run_and_get_code(compiled, x, weight)
    assert "torch.ops.npu.rms_norm.default(" in code
    assert "torch.ops.npu.fast_gelu.default(" in code
    loss.backward()

    eager_x, eager_weight = _inputs()
    expected = _block(eager_x, eager_weight)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(x.grad, eager_x.grad)
    torch.testing.assert_close(weight.grad, eager_weight.grad)
