"""The Habana-like backend on the in-tree HPU key, through `import torch` alone."""

import io
import subprocess
import time

import pytest
import torch

from torchplug_testing import child


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = child.child_environment(drop=("TORCHPLUG_",), **env)
    return child.run_python(code, environment, timeout=300)


def test_seed_example_resnet50_matches_cpu() -> None:
    import torchvision.models as models

    torch.manual_seed(0)
    model = models.resnet50().eval()
    batch = torch.rand(2, 3, 224, 224)
    with torch.no_grad():
        expected = model(batch)
        output = model.to("hpu")(batch.to("hpu"))
    assert output.device.type == "hpu"
    torch.testing.assert_close(output.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_seed_example_verbatim_in_fresh_interpreter() -> None:
    result = run_python(
        """
        import torch
        import torchvision.models as models
        model = models.resnet50().eval().to("hpu")
        input = torch.rand(2, 3, 224, 224).to("hpu")
        output = model(input)
        print(output.shape, output.device)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "torch.Size([2, 1000]) hpu:0"


# Upstream limitation on the CUDA build of torch (the one the lock resolves to on
# Linux): at::getAccelerator() counts compiled-in CUDA as present, so with an
# HPU integration it raises "Cannot have both HPU and cuda", and autograd asks
# it for every node; with a PrivateUse1 backend also active, autograd's stream
# bookkeeping asserts for non-current accelerators. A CPU build of torch has
# neither problem. Strict xfails: these turn into failures once it works.
CUDA_BUILD_HPU_AUTOGRAD = pytest.mark.xfail(
    torch.backends.cuda.is_built(),
    reason="torch CUDA builds cannot run autograd on HPU (see comment above)",
    strict=True,
)


@CUDA_BUILD_HPU_AUTOGRAD
def test_training_matches_cpu() -> None:
    def train(device: str) -> list[float]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1)
        ).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        x, y = torch.randn(32, 8), torch.randn(32, 1)
        losses = []
        for _ in range(5):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    torch.testing.assert_close(train("hpu"), train("cpu"), rtol=1e-5, atol=1e-6)


def test_device_surface() -> None:
    assert torch.hpu.is_available()
    assert torch.hpu.device_count() == 2
    assert torch.hpu.get_device_properties(1).total_memory > 0
    with torch.hpu.device(1):
        assert torch.ones(1, device="hpu").device == torch.device("hpu", 1)
    x = torch.empty(1 << 20, dtype=torch.uint8, device="hpu")
    assert torch.hpu.memory_allocated() >= 1 << 20
    del x
    torch.hpu.manual_seed(3)
    a = torch.randn(4, device="hpu").cpu()
    torch.hpu.manual_seed(3)
    assert torch.equal(a, torch.randn(4, device="hpu").cpu())
    stream = torch.hpu.Stream()
    start, end = (
        torch.Event(device="hpu", enable_timing=True),
        torch.Event(device="hpu", enable_timing=True),
    )
    with torch.hpu.stream(stream):
        start.record()
        torch.hpu._sleep(20)
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 15
    host = torch.randn(16).pin_memory()
    assert host.is_pinned()
    assert torch.equal(host.to("hpu", non_blocking=True).cpu(), host)


def test_elementwise_arithmetic_matches_cpu() -> None:
    """The core's direct CPU loops serve PrivateUse1 only; on hpu the same ops
    must still give the CPU's results (through host aliases)."""
    a, b = torch.randn(4, 3), torch.randn(3).add(3)
    for op in (torch.add, torch.sub, torch.mul, torch.div):
        result = op(a.to("hpu"), b.to("hpu"))
        assert result.device.type == "hpu"
        torch.testing.assert_close(result.cpu(), op(a, b))


HPU_OPERATIONS = {
    "matmul": lambda a, b: a @ b,
    "add": torch.add,
    "in-place": lambda a, b: a.clone().mul_(b),
    "softmax": lambda a, b: torch.softmax(a, dim=1),
    "two-results": lambda a, b: torch.max(a, dim=1),
}


@pytest.mark.parametrize("operation", HPU_OPERATIONS.values(), ids=HPU_OPERATIONS.keys())
def test_an_hpu_operator_returns_before_its_result_is_ready(operation) -> None:
    """hpu's operators run the CPU's kernels over its memory, queued on its
    stream as the PrivateUse1 devices' kernels are."""
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    expected = operation(a, b)
    on_hpu = a.to("hpu"), b.to("hpu")
    operation(*on_hpu)
    torch.hpu.synchronize()
    torch.hpu._sleep(200)
    result = operation(*on_hpu)
    assert not torch.hpu.current_stream().query()  # queued behind the sleep
    for got, want in zip(_tuple(result), _tuple(expected), strict=True):
        assert got.device.type == "hpu"
        assert torch.equal(got.cpu(), want)


def _tuple(result) -> tuple[torch.Tensor, ...]:
    return tuple(result) if isinstance(result, tuple) else (result,)


def test_mark_step_waits_for_queued_work() -> None:
    from vhabana_frameworks.torch import core

    stream = torch.hpu.Stream()
    with torch.hpu.stream(stream):
        torch.hpu._sleep(100)
    started = time.perf_counter()
    core.mark_step()
    assert time.perf_counter() - started >= 0.09
    assert stream.query()


def test_save_and_load_with_map_location() -> None:
    state = {"w": torch.arange(4.0, device="hpu"), "b": torch.ones(2)}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, map_location="hpu:1")
    assert loaded["w"].device == torch.device("hpu", 1)
    assert loaded["w"].cpu().tolist() == [0, 1, 2, 3]
    buffer.seek(0)
    assert torch.load(buffer, map_location="cpu")["w"].device.type == "cpu"
    buffer.seek(0)
    assert torch.load(buffer)["w"].device == torch.device("hpu", 0)


def test_coexists_with_privateuse1_backend() -> None:
    torch.hpu.empty_cache()
    torch.foo.empty_cache()
    hpu_before, foo_before = torch.hpu.memory_allocated(), torch.foo.memory_allocated()
    on_foo = torch.arange(6.0, device="foo")
    on_hpu = on_foo.to("hpu")
    assert on_hpu.device.type == "hpu"
    assert on_hpu.to("foo").cpu().tolist() == list(range(6))
    assert torch.hpu.memory_allocated() > hpu_before
    assert torch.foo.memory_allocated() > foo_before
    del on_hpu
    assert torch.hpu.memory_allocated() == hpu_before
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device="foo") + torch.ones(3, device="hpu")


# On a CUDA build torch refuses hpu as the accelerator: test_hpu_device_generic.py
# holds what torchplug answers there instead.
@CUDA_BUILD_HPU_AUTOGRAD
def test_accelerator_is_hpu_without_privateuse1_backend() -> None:
    result = run_python(
        """
        import torch
        print(torch.accelerator.current_accelerator(), torch.accelerator.device_count())
        print(torch.accelerator.memory_allocated() >= 0)
        """,
        TORCHPLUG_DISABLE="foo,npu",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["hpu", "2", "True"]


@pytest.mark.parametrize(
    "imports",
    [
        "import vhabana_frameworks.torch\nimport torch",
        "import torch\nimport vhabana_frameworks.torch",
        "import vhabana_frameworks\nimport torch\nimport vhabana_frameworks.torch\nvhabana_frameworks.__autoload()",
    ],
)
def test_every_import_order_is_safe(imports: str) -> None:
    result = run_python(
        imports
        + "\nimport vhabana_frameworks\nprint(vhabana_frameworks.is_loaded, torch.ones(1, device='hpu').device)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True hpu:0"


def test_autoload_off_then_explicit_import() -> None:
    result = run_python(
        """
        import torch
        assert not hasattr(torch, "hpu")
        import vhabana_frameworks.torch
        print(torch.ones(2, device="hpu").sum().item())
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2.0"
