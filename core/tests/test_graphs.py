"""Graph capture and replay (torch.<device>.Graph, torch.<device>.graph,
torch.accelerator.Graph) and private memory pools (MemPool, use_mem_pool), on
every torchplug device: a capture records the stream's work without running
it, a replay runs it again over the same memory, as CUDA graphs do."""

from __future__ import annotations

import copy
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import pytest
import torch
import torch.nn.functional as F

from device_matrix import active_devices, rerun_as_owner, with_backward
from torchplug import sanitizer

DEVICES = active_devices()


def module(device: str):
    return getattr(torch, device)


def capture(device: str, body, *, pool=None):
    """A graph of `body` captured on the device, after one warm-up call (as CUDA graphs need)."""
    side = module(device).Stream()
    side.wait_stream(module(device).current_stream())
    with module(device).stream(side):
        body()
    module(device).synchronize()
    graph = module(device).Graph()
    with module(device).graph(graph, pool=pool):
        result = body()
    return graph, result


@pytest.mark.parametrize("device", DEVICES)
def test_a_capture_records_the_work_and_each_replay_runs_it_again(device: str) -> None:
    counter = torch.zeros(4, device=device)
    graph, _ = capture(device, lambda: counter.add_(1))
    module(device).synchronize()
    # The warm-up ran once; the capture ran nothing.
    assert counter.cpu().tolist() == [1.0] * 4
    graph.replay()
    graph.replay()
    module(device).synchronize()
    assert counter.cpu().tolist() == [3.0] * 4


@pytest.mark.parametrize("device", DEVICES)
def test_replays_compute_the_cpus_values_from_the_inputs_of_the_moment(device: str) -> None:
    torch.manual_seed(0)
    weight = torch.randn(16, 8)
    static_input = torch.empty(4, 16, device=device)
    device_weight = weight.to(device)

    def step():
        hidden = F.gelu(static_input @ device_weight)  # a native matmul, a host kernel
        return torch.special.bessel_j0(hidden).sum(dim=1)  # the CPU fallback, a reduction

    static_input.copy_(torch.randn(4, 16))
    graph, static_output = capture(device, step)
    for _ in range(3):
        fresh = torch.randn(4, 16)
        static_input.copy_(fresh)
        graph.replay()
        expected = torch.special.bessel_j0(F.gelu(fresh @ weight)).sum(dim=1)
        assert torch.equal(static_output.cpu(), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_memory_allocated_in_a_capture_stays_the_graphs(device: str) -> None:
    source = torch.arange(1024.0, device=device)
    graph, result = capture(device, lambda: (source * 2 + 1) * 3)  # a temporary freed inside
    pointer = result.data_ptr()
    # Allocations after the capture get other memory, however many and whatever their size.
    others = [torch.full((1024,), -7.0, device=device) for _ in range(8)]
    assert all(other.data_ptr() != pointer for other in others)
    graph.replay()
    expected = (torch.arange(1024.0) * 2 + 1) * 3
    assert torch.equal(result.cpu(), expected)
    assert all(torch.equal(other.cpu(), torch.full((1024,), -7.0)) for other in others)
    # A second graph shares the first's pool.
    second, doubled = capture(device, lambda: result * 2, pool=graph.pool())
    assert second.pool() == graph.pool()
    graph.replay()
    second.replay()
    assert torch.equal(doubled.cpu(), expected * 2)


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_differs_between_replays_and_seeding_restores_it(device: str) -> None:
    ones = torch.ones(4096, device=device)
    graph, dropped = capture(device, lambda: F.dropout(ones, 0.5))
    graph.replay()
    first = dropped.cpu()
    graph.replay()
    second = dropped.cpu()
    assert not torch.equal(first, second)
    torch.manual_seed(123)
    graph.replay()
    seeded = dropped.cpu()
    graph.replay()
    torch.manual_seed(123)
    graph.replay()
    assert torch.equal(dropped.cpu(), seeded)
    assert set(seeded.unique().tolist()) == {0.0, 2.0}


@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_a_captured_training_step_trains_as_on_the_cpu(device: str) -> None:
    torch.manual_seed(0)
    network = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    device_network = copy.deepcopy(network).to(device)
    cpu_optimizer = torch.optim.SGD(network.parameters(), lr=0.1, foreach=False)
    device_optimizer = torch.optim.SGD(device_network.parameters(), lr=0.1, foreach=False)
    batches = [(torch.randn(5, 8), torch.randn(5, 2)) for _ in range(4)]
    static_x = batches[0][0].to(device)
    static_y = batches[0][1].to(device)

    def device_step() -> torch.Tensor:
        device_optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(device_network(static_x), static_y)
        loss.backward()
        device_optimizer.step()
        return loss

    for x, y in batches[:1]:  # the warm-up step is the first training step on both sides
        cpu_optimizer.zero_grad(set_to_none=True)
        F.mse_loss(network(x), y).backward()
        cpu_optimizer.step()
    graph, static_loss = capture(device, device_step)
    for x, y in batches[1:]:
        cpu_optimizer.zero_grad(set_to_none=True)
        expected_loss = F.mse_loss(network(x), y)
        expected_loss.backward()
        cpu_optimizer.step()
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        torch.testing.assert_close(static_loss.cpu(), expected_loss.detach())
    for parameter, device_parameter in zip(
        network.parameters(), device_network.parameters(), strict=True
    ):
        torch.testing.assert_close(device_parameter.detach().cpu(), parameter.detach())


@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_graphed_modules_train_as_the_cpu_and_run_eagerly_in_the_other_mode(device: str) -> None:
    def networks() -> tuple[torch.nn.Module, torch.nn.Module]:
        torch.manual_seed(0)
        encoder = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)
        )
        return encoder, torch.nn.Linear(4, 2)

    cpu_encoder, cpu_head = networks()
    encoder, head = (network.to(device) for network in networks())
    sample_x = torch.randn(5, 8, device=device)
    sample_hidden = torch.randn(5, 4, device=device, requires_grad=True)
    encoder, head = module(device).make_graphed_callables(
        (encoder, head), ((sample_x,), (sample_hidden,))
    )
    cpu_optimizer = torch.optim.SGD([*cpu_encoder.parameters(), *cpu_head.parameters()], lr=0.1)
    optimizer = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1, foreach=False)
    for _ in range(3):
        x, y = torch.randn(5, 8), torch.randn(5, 2)
        cpu_optimizer.zero_grad(set_to_none=True)
        optimizer.zero_grad(set_to_none=True)
        expected = F.mse_loss(cpu_head(cpu_encoder(x)), y)
        expected.backward()
        cpu_optimizer.step()
        loss = F.mse_loss(head(encoder(x.to(device))), y.to(device))
        loss.backward()
        optimizer.step()
        assert torch.equal(loss.cpu(), expected.detach())
    for cpu_parameter, parameter in zip(
        [*cpu_encoder.parameters(), *cpu_head.parameters()],
        [*encoder.parameters(), *head.parameters()],
        strict=True,
    ):
        assert torch.equal(parameter.detach().cpu(), cpu_parameter.detach())
    # Captured in training mode: in eval mode the module's own forward runs,
    # with the parameters of the moment and any batch size.
    encoder.eval()
    x = torch.randn(3, 8)
    assert torch.equal(encoder(x.to(device)).detach().cpu(), cpu_encoder.eval()(x).detach())


@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_a_graphed_function_gives_the_cpus_values_and_gradients(device: str) -> None:
    def function(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (a * b).sin(), a + b

    samples = tuple(torch.randn(6, device=device, requires_grad=True) for _ in range(2))
    graphed = module(device).make_graphed_callables(function, samples)
    a, b = (torch.randn(6, requires_grad=True) for _ in range(2))
    device_a, device_b = (t.detach().to(device).requires_grad_() for t in (a, b))
    first, second = graphed(device_a, device_b)
    (first.sum() + second.sum()).backward()
    expected_first, expected_second = function(a, b)
    (expected_first.sum() + expected_second.sum()).backward()
    assert torch.equal(first.detach().cpu(), expected_first.detach())
    assert torch.equal(device_a.grad.cpu(), a.grad)
    assert torch.equal(device_b.grad.cpu(), b.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_a_graphed_callable_replays_its_forward_without_autograd(device: str) -> None:
    linear = torch.nn.Linear(6, 3).to(device).requires_grad_(False)
    graphed = module(device).make_graphed_callables(linear, (torch.zeros(2, 6, device=device),))
    for _ in range(2):
        x = torch.randn(2, 6)
        expected = F.linear(x, linear.weight.cpu(), linear.bias.cpu())
        assert torch.equal(graphed(x.to(device)).cpu(), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_make_graphed_callables_rejects_what_it_cannot_replay(device: str) -> None:
    make = module(device).make_graphed_callables
    linear = torch.nn.Linear(2, 2).to(device)
    with pytest.raises(TypeError, match=r"must be a tuple.*\(tensor,\)"):
        make(linear, torch.ones(1, 2, device=device))
    with pytest.raises(ValueError, match=rf"is on cpu.*\.to\('{device}'\)"):
        make(linear, (torch.ones(1, 2),))
    with pytest.raises(TypeError, match="only tensors"):
        make(lambda x, scale: x * scale, (torch.ones(2, device=device), 2.0))
    with pytest.raises(ValueError, match="2 callables but 1"):
        make((linear, linear), ((torch.ones(1, 2, device=device),),))
    linear.register_forward_hook(lambda *_: None)
    with pytest.raises(ValueError, match="has hooks"):
        make(linear, (torch.ones(1, 2, device=device),))
    with (
        torch.autocast(device, dtype=torch.bfloat16),
        pytest.raises(RuntimeError, match="cache_enabled=False"),
    ):
        make(lambda x: x * 2, (torch.ones(2, device=device),))

    class Scaled(torch.nn.Module):
        def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
            return x * scale

    scaled = make(Scaled(), (torch.ones(2, device=device),))
    with pytest.raises(TypeError, match=r"keyword arguments \(scale\)"):
        scaled(torch.ones(2, device=device), scale=2.0)
    # The graphed module is freed with its last reference, without the cyclic collector.
    held = weakref.ref(scaled)
    gc.disable()
    try:
        del scaled
        assert held() is None
    finally:
        gc.enable()
    graphed = make(lambda x: x * 2, (torch.ones(2, device=device),))
    with pytest.raises(ValueError, match="captured with 1 tensor arguments and was called with 2"):
        graphed(torch.ones(2, device=device), torch.ones(2, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_read_in_a_capture_raises_and_the_capture_is_abandoned(device: str) -> None:
    values = torch.ones(8, device=device)
    graph = module(device).Graph()
    with (
        pytest.raises(RuntimeError, match=r"capturing a graph.*warm-up"),
        module(device).graph(graph),
    ):
        (values * 2).sum().item()
    assert not module(device).is_current_stream_capturing()
    # The stream and the graph are usable again.
    assert (values * 3).sum().item() == 24.0
    graph, _ = capture(device, lambda: values.mul_(2))
    graph.replay()
    assert values.cpu().tolist() == [4.0] * 8


@pytest.mark.parametrize("mode", ["default", "global", "thread_local", "relaxed"])
@pytest.mark.parametrize("device", DEVICES)
def test_every_capture_error_mode_captures_and_refuses_host_reads(device: str, mode: str) -> None:
    values = torch.ones(4, device=device)
    graph = module(device).Graph(keep_graph=True)
    with module(device).graph(graph, capture_error_mode=mode):
        values.mul_(3)
    graph.instantiate()
    graph.replay()
    assert values.cpu().tolist() == [3.0] * 4
    # What would run on the host cannot be captured, whatever the mode.
    with (
        pytest.raises(RuntimeError, match="capturing a graph"),
        module(device).graph(module(device).Graph(), capture_error_mode=mode),
    ):
        values.sum().item()


@pytest.mark.parametrize("device", DEVICES)
def test_capture_errors_name_the_fix(device: str) -> None:
    graph = module(device).Graph()
    with pytest.raises(RuntimeError, match=r"default stream.*Stream"):
        graph.capture_begin()
    with pytest.raises(RuntimeError, match="no captured graph to replay"):
        graph.replay()
    with pytest.raises(RuntimeError, match="not capturing"):
        graph.capture_end()
    with pytest.raises(RuntimeError, match=r"capture_error_mode.*'relaxed'"):
        graph.capture_begin(capture_error_mode="loose")
    side = module(device).Stream()
    with module(device).stream(side):
        graph.capture_begin()
        assert module(device).is_current_stream_capturing()
        with pytest.raises(RuntimeError, match="capturing already"):
            graph.capture_begin()
        with pytest.raises(RuntimeError, match="capturing a graph"):
            module(device).synchronize()
        graph.capture_end()
    assert not module(device).is_current_stream_capturing()


def test_torch_accelerator_graph_captures_on_the_accelerator(device: str) -> None:
    assert torch.accelerator.current_accelerator().type == device
    values = torch.zeros(3, device=device)
    values.add_(1)
    graph = torch.accelerator.Graph(keep_graph=True)
    with torch.Stream(device=device), graph:
        values.add_(1)
    graph.instantiate()
    graph.replay()
    graph.replay()
    assert values.cpu().tolist() == [3.0] * 3
    graph.enable_debug_mode()


def test_the_sanitizer_checks_replays_not_captures(device: str) -> None:
    values = torch.ones(1024, device=device)
    with sanitizer.enabled():
        graph, doubled = capture(device, lambda: values * 2)
        graph.replay()  # on the default stream
        doubled.sum()  # the same stream: ordered after the replay
        side = torch.foo.Stream()
        with torch.foo.stream(side), pytest.raises(sanitizer.StreamRaceError, match="aten::mul"):
            doubled.add_(1)  # written on another stream while the replay may still write it
        side.wait_stream(torch.foo.current_stream())
        with torch.foo.stream(side):
            doubled.add_(1)


@pytest.mark.parametrize("device", DEVICES)
def test_the_profiler_shows_each_replay_and_its_kernels(device: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    matrix = torch.randn(32, 32, device=device)
    graph, _ = capture(device, lambda: (torch.special.bessel_j0(matrix @ matrix)).relu())
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as trace:
        graph.replay()
        graph.replay()
        module(device).synchronize()
    if device != "hpu":  # torch takes device activity from PrivateUse1 backends only
        kernels = [
            event.name
            for event in trace.events()
            if event.device_type != torch.autograd.DeviceType.CPU
        ]
        assert kernels.count("aten::mm kernel") == 2, kernels
        assert kernels.count("aten::special_bessel_j0 (CPU fallback)") == 2, kernels
    replays = [event.name for event in trace.events() if event.name.endswith("Graph.replay")]
    assert replays == [f"torch.{device}.Graph.replay"] * 2, replays


@pytest.mark.parametrize("device", DEVICES)
def test_a_mem_pool_serves_only_the_allocations_routed_to_it(device: str) -> None:
    pool = module(device).MemPool()
    with module(device).use_mem_pool(pool):
        inside = torch.empty(4096, device=device)
    pointer = inside.data_ptr()
    del inside
    outside = torch.empty(4096, device=device)
    assert outside.data_ptr() != pointer  # the pool's free block is not the default pool's
    with module(device).use_mem_pool(pool):
        again = torch.empty(4096, device=device)
    assert again.data_ptr() == pointer


def test_graphs_without_the_drivers_extension_give_a_clear_error() -> None:
    """The remote driver (memory in a device process) offers no graph capture."""
    script = textwrap.dedent(
        """
        import torch
        from torchplug import Backend, get_remote_driver
        status = Backend(name="dsc", driver=get_remote_driver()).autoload()
        assert status.active, status.reason
        side = torch.dsc.Stream()
        graph = torch.dsc.Graph()
        with torch.dsc.stream(side):
            try:
                graph.capture_begin()
            except RuntimeError as error:
                print("ERROR", error)
            print("capturing", torch.dsc.is_current_stream_capturing())
            print("works", (torch.ones(2, device="dsc") * 2).tolist())
        """
    )
    environment = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCHPLUG_PRIVATEUSE1="dsc")
    completed = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=300
    )
    output = completed.stdout + completed.stderr
    assert "offers no graph capture" in completed.stdout, output
    assert "capturing False" in completed.stdout, output
    assert "works [2.0, 2.0]" in completed.stdout, output


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
