"""torch.compile with the default backend (Inductor) on every torchplug device.

Compiled code must give what compiled code gives on the CPU, run its kernels
as device kernels (profiler, strict memory, the device's allocator) and keep
Dynamo's guarantees (device-aware guards, no graph break caused by the device).
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from device_matrix import active_devices, rerun_as_owner, with_backward
from torchplug_bench.compile import WORKLOADS, batches, build_model, loss

DEVICES = active_devices()


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


def _compiled_losses(
    workload: str, device: str, steps: int, autocast_dtype: torch.dtype | None = None
) -> list[float]:
    model = build_model(workload).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    @torch.compile
    def step(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with torch.autocast(
            device, dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None
        ):
            value = loss(workload, model, inputs, targets)
        value.backward()
        return value.detach()

    losses = []
    for inputs, targets in batches(workload, steps):
        losses.append(step(inputs.to(device), targets.to(device)).item())
        optimizer.step()
        optimizer.zero_grad()
    return losses


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_compiled_training_matches_compiled_cpu(device: str, workload: str) -> None:
    expected = _compiled_losses(workload, "cpu", 5)
    torch._dynamo.reset()
    assert _compiled_losses(workload, device, 5) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("device", [name for name in DEVICES if name != "hpu"])
def test_a_compiled_mlp_step_runs_no_operator_on_the_fallback(device: str) -> None:
    """Compiled matrix products are extern kernels into Inductor's buffers
    (mm.out, addmm.out): device kernels, not the fallback's boxed path."""
    module = getattr(torch, device)
    losses = _compiled_losses("mlp", device, 1)
    module.reset_fallback_report()
    losses += _compiled_losses("mlp", device, 2)
    assert module.fallback_report() == []


@pytest.mark.parametrize("device", [name for name in DEVICES if name != "hpu"])
def test_compiled_training_under_bf16_autocast(device: str) -> None:
    bf16 = torch.bfloat16
    expected = _compiled_losses("transformer_lm", "cpu", 3, autocast_dtype=bf16)
    torch._dynamo.reset()
    losses = _compiled_losses("transformer_lm", device, 3, autocast_dtype=bf16)
    assert losses == pytest.approx(expected, abs=2e-2)


class ResidualBlock(nn.Module):
    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + x)


def _inference_models() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    encoder_layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return {
        "transformer_encoder": (
            nn.TransformerEncoder(encoder_layer, 2).eval(),
            torch.randn(2, 10, 32),
        ),
        "residual_conv": (
            nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), ResidualBlock()).eval(),
            torch.randn(2, 3, 16, 16),
        ),
    }


@pytest.mark.parametrize("name", ["transformer_encoder", "residual_conv"])
@pytest.mark.parametrize("device", DEVICES)
def test_compiled_inference_matches_eager_cpu(device: str, name: str) -> None:
    model, inputs = _inference_models()[name]
    with torch.no_grad():
        expected = model(inputs)
        compiled = torch.compile(copy.deepcopy(model).to(device))
        output = compiled(inputs.to(device))
    assert output.device.type == device
    torch.testing.assert_close(output.cpu(), expected, atol=1e-5, rtol=1e-5)


# Lowerings that pick their arithmetic by asking whether the device is the
# CPU: the device must get the CPU's choice, so results are bitwise equal.
CPU_ARITHMETIC = {
    "var_mean (batch norm statistics)": lambda x: torch.var_mean(x, dim=(0, 2, 3)),
    "layer_norm": lambda x: F.layer_norm(x, (16,)),
    "division by a constant": lambda x: x / 7.0,
    "max_pool2d": lambda x: F.max_pool2d(x, 3, 2, 1),
}


@pytest.mark.parametrize("case", CPU_ARITHMETIC)
@pytest.mark.parametrize("device", DEVICES)
def test_compiled_arithmetic_is_the_compiled_cpus_to_the_bit(device: str, case: str) -> None:
    function = CPU_ARITHMETIC[case]
    x = torch.randn(4, 8, 16, 16, generator=torch.Generator().manual_seed(0)) * 3 + 5
    expected = torch.compile(function)(x)
    torch._dynamo.reset()
    got = torch.compile(function)(x.to(device))
    for want, have in zip(
        torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(got), strict=True
    ):
        assert have.device.type == device
        assert torch.equal(have.cpu(), want)


def _pointwise_and_matmul(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x @ x.T).softmax(-1) + x.sin()


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("device", DEVICES)
def test_no_graph_break_on_the_device(device: str, workload: str) -> None:
    model = build_model(workload).to(device)
    inputs, targets = batches(workload, 1)[0]
    explanation = torch._dynamo.explain(loss)(
        workload, model, inputs.to(device), targets.to(device)
    )
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


@pytest.mark.parametrize("device", DEVICES)
def test_guards_tell_devices_apart(device: str) -> None:
    compiled_for: list[set[str]] = []

    def counting_backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        compiled_for.append({str(t.device) for t in example_inputs if isinstance(t, torch.Tensor)})
        return graph.forward

    compiled = torch.compile(_pointwise_and_matmul, backend=counting_backend)
    x = torch.randn(8, 8)
    targets = [f"{device}:0", "cpu"]
    if getattr(torch, device).device_count() > 1:
        targets.insert(1, f"{device}:1")
    for target in targets:
        result = compiled(x.to(target))
        assert str(result.device) == target
        torch.testing.assert_close(result.cpu(), _pointwise_and_matmul(x))
    assert compiled_for == [{target} for target in targets]
    inductor = torch.compile(_pointwise_and_matmul)
    for target in targets:
        torch.testing.assert_close(inductor(x.to(target)).cpu(), _pointwise_and_matmul(x))


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_shapes(device: str) -> None:
    compiled = torch.compile(_pointwise_and_matmul, dynamic=True)
    for size in (8, 12, 20):
        x = torch.randn(size, size)
        torch.testing.assert_close(compiled(x.to(device)).cpu(), _pointwise_and_matmul(x))


@pytest.mark.parametrize("device", DEVICES)
def test_max_autotune_runs(device: str) -> None:
    x = torch.randn(16, 16)
    result = torch.compile(_pointwise_and_matmul, mode="max-autotune")(x.to(device))
    torch.testing.assert_close(result.cpu(), _pointwise_and_matmul(x))


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_overhead_runs_and_says_once_that_it_does_not_replay(device: str) -> None:
    from torchplug.inductor import wrapper

    wrapper._say_graphs_are_not_replayed.cache_clear()
    x = torch.randn(16, 16)
    with (
        warnings.catch_warnings(record=True) as caught,
        torch._inductor.config.patch(fx_graph_cache=False),  # a cache hit compiles nothing
    ):
        warnings.simplefilter("always")
        for _ in range(2):
            torch._dynamo.reset()
            result = torch.compile(_pointwise_and_matmul, mode="reduce-overhead")(x.to(device))
    torch.testing.assert_close(result.cpu(), _pointwise_and_matmul(x))
    messages = [str(w.message) for w in caught if "reduce-overhead" in str(w.message)]
    assert len(messages) == 1, messages
    assert f"on {device} runs the compiled code without graph replay" in messages[0]
    assert f"torch.{device}.graph" in messages[0]


@pytest.mark.parametrize("device", DEVICES)
def test_a_compiled_function_captured_in_a_graph_replays(device: str) -> None:
    compiled = torch.compile(_pointwise_and_matmul)
    static_x = torch.randn(16, 16, device=device)
    module = getattr(torch, device)
    side = module.Stream()
    side.wait_stream(module.current_stream())
    with module.stream(side):
        compiled(static_x)  # compiles, and warms up
    module.synchronize()
    graph = module.Graph()
    with module.graph(graph):
        static_result = compiled(static_x)
    for _ in range(2):
        x = torch.randn(16, 16)
        static_x.copy_(x)
        graph.replay()
        torch.testing.assert_close(static_result.cpu(), _pointwise_and_matmul(x))


# torch's profiler takes device activities from PrivateUse1 backends only.
@pytest.mark.parametrize("device", [name for name in DEVICES if name != "hpu"])
def test_compiled_kernels_are_device_kernels(device: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    compiled = torch.compile(_pointwise_and_matmul)
    x = torch.randn(32, 32, device=device)
    compiled(x)
    module = getattr(torch, device)
    module.reset_peak_memory_stats()
    before = module.memory_allocated()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as trace:
        result = compiled(x)
        module.synchronize()
    assert module.memory_allocated() - before >= result.numel() * result.element_size()
    device_kernels = [
        event.name
        for event in trace.events()
        if event.device_type != torch.autograd.DeviceType.CPU and event.name.startswith("cpp_fused")
    ]
    assert device_kernels, sorted({event.name for event in trace.events()})


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_kernels_pass_strict_memory_mode(device: str) -> None:
    from torchplug import _C

    compiled = torch.compile(_pointwise_and_matmul)
    x = torch.randn(16, 16)
    _C.set_strict_mode(True)
    try:
        result = compiled(x.to(device))
        torch.testing.assert_close(result.cpu(), _pointwise_and_matmul(x))
    finally:
        _C.set_strict_mode(False)


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu", timeout=1200)


@pytest.mark.parametrize("device", DEVICES)
def test_a_device_compile_failure_names_device_and_workaround(device: str) -> None:
    from torchplug.inductor.errors import DeviceCompileError

    x = torch.randn(8, 8)
    with (
        torch._inductor.config.patch(cpp_wrapper=True),
        pytest.raises(Exception, match=rf"'{device}' device.*backend='aot_eager'") as failure,
    ):
        torch.compile(_pointwise_and_matmul)(x.to(device))
    cause = failure.value
    while cause is not None and not isinstance(cause, DeviceCompileError):
        cause = cause.__cause__ or getattr(cause, "inner_exception", None)
    assert isinstance(cause, DeviceCompileError)
    assert "C++ wrapper" in str(failure.value)
    torch._dynamo.reset()
    fallback = torch.compile(_pointwise_and_matmul, backend="aot_eager")(x.to(device))
    torch.testing.assert_close(fallback.cpu(), _pointwise_and_matmul(x))
