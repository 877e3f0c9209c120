"""The vendor operators torch.ops.npu.fast_gelu / rms_norm: values, gradients, compile, errors."""

import os
import subprocess
import sys

import pytest
import torch

import torch_vnpu

EPS = 1e-5


def fast_gelu_reference(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def inputs(device: str, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 24, generator=generator, dtype=torch.float64) * 3
    weight = torch.rand(24, generator=generator, dtype=torch.float64) + 0.5
    return (
        x.to(device, dtype).requires_grad_(),
        weight.to(device, dtype).requires_grad_(),
    )


@pytest.mark.parametrize("device", ["cpu", "npu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fast_gelu_matches_composite_reference(npu: str, device: str, dtype: torch.dtype) -> None:
    x, _ = inputs(device, dtype)
    reference_x, _ = inputs("cpu", dtype)
    y = torch_vnpu.fast_gelu(x)
    expected = fast_gelu_reference(reference_x)
    assert y.device.type == device
    torch.testing.assert_close(y.cpu(), expected.detach())
    grad = torch.linspace(-1, 1, y.numel(), dtype=dtype).reshape(y.shape)
    y.backward(grad.to(device))
    expected.backward(grad)
    torch.testing.assert_close(x.grad.cpu(), reference_x.grad)


@pytest.mark.parametrize("device", ["cpu", "npu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rms_norm_matches_composite_reference(npu: str, device: str, dtype: torch.dtype) -> None:
    x, weight = inputs(device, dtype)
    reference_x, reference_weight = inputs("cpu", dtype)
    y = torch_vnpu.rms_norm(x, weight, EPS)
    expected = rms_norm_reference(reference_x, reference_weight, EPS)
    torch.testing.assert_close(y.cpu(), expected.detach())
    grad = torch.linspace(-1, 1, y.numel(), dtype=dtype).reshape(y.shape)
    y.backward(grad.to(device))
    expected.backward(grad)
    torch.testing.assert_close(x.grad.cpu(), reference_x.grad)
    torch.testing.assert_close(weight.grad.cpu(), reference_weight.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_narrow_types_round_once(npu: str, dtype: torch.dtype) -> None:
    # Fused kernels compute in float and round the result once: they agree
    # with the float32 reference to the narrow type's resolution.
    x, weight = inputs("npu", dtype)
    reference_x, reference_weight = inputs("cpu", torch.float32)
    y = torch_vnpu.rms_norm(torch_vnpu.fast_gelu(x), weight, EPS)
    expected = rms_norm_reference(fast_gelu_reference(reference_x), reference_weight, EPS)
    assert y.dtype == dtype
    torch.testing.assert_close(y.float().cpu(), expected.detach(), rtol=1e-2, atol=2e-2)


def test_non_contiguous_inputs(npu: str) -> None:
    x = torch.randn(24, 6).t().npu()  # a transposed view
    weight = torch.rand(24).npu()
    torch.testing.assert_close(
        torch_vnpu.rms_norm(x, weight, EPS).cpu(),
        rms_norm_reference(x.cpu(), weight.cpu(), EPS),
    )
    torch.testing.assert_close(torch_vnpu.fast_gelu(x).cpu(), fast_gelu_reference(x.cpu()))


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_opcheck_schema_autograd_and_fake_kernels(npu: str, device: str) -> None:
    x, weight = inputs(device)
    checks = (
        "test_schema",
        "test_autograd_registration",
        "test_faketensor",
        "test_aot_dispatch_dynamic",
    )
    if device != "cpu":
        # Upstream's autograd-registration check only knows CPU/CUDA/XPU; the
        # registration it checks is device-independent and covered on CPU.
        checks = tuple(check for check in checks if check != "test_autograd_registration")
    torch.library.opcheck(torch.ops.npu.fast_gelu.default, (x,), test_utils=checks)
    torch.library.opcheck(torch.ops.npu.rms_norm.default, (x, weight, EPS), test_utils=checks)


def test_kernels_wait_for_work_queued_on_the_stream(npu: str) -> None:
    # A slow simulated kernel holds the stream, then an asynchronous copy
    # fills `x`: the fused kernel must see the copied values, not stale ones.
    source = torch.full((1 << 16,), 2.0).pin_memory()
    x = torch.zeros(1 << 16, device="npu")
    torch.npu._sleep(50)
    x.copy_(source, non_blocking=True)
    y = torch_vnpu.fast_gelu(x)
    torch.testing.assert_close(y.cpu(), fast_gelu_reference(source))


def test_compile_traces_the_custom_ops(npu: str) -> None:
    def block(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch_vnpu.fast_gelu(torch_vnpu.rms_norm(x, weight, EPS)).sum()

    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    x, weight = inputs("npu")
    eager_x, eager_weight = inputs("npu")
    loss = compiled(x, weight)
    loss.backward()
    expected = block(eager_x, eager_weight)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(x.grad, eager_x.grad)
    torch.testing.assert_close(weight.grad, eager_weight.grad)


def test_bad_input_names_the_problem_and_the_fix(npu: str) -> None:
    with pytest.raises(RuntimeError, match=r"weight must be 1-D with as many elements"):
        torch_vnpu.rms_norm(torch.ones(2, 3, device="npu"), torch.ones(4, device="npu"))
    with pytest.raises(RuntimeError, match=r"expected weight on npu:0 like input.*\.to\("):
        torch_vnpu.rms_norm(torch.ones(2, 3, device="npu"), torch.ones(3))
    with pytest.raises(RuntimeError, match=r"must be a floating-point tensor.*\.float\(\)"):
        torch_vnpu.fast_gelu(torch.ones(3, dtype=torch.int64, device="npu"))


OVERLAP_ERROR = (
    r"unsupported operation: some elements of the input tensor and the written-to tensor"
)


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_fast_gelu_out_writes_the_given_tensor(npu: str, device: str) -> None:
    source = torch.linspace(-3, 3, 24, dtype=torch.float64).reshape(4, 6)
    x = source.to(device, copy=True)  # the in-place case below must not write `source`
    out = torch.empty(0, dtype=torch.float64, device=device)
    assert torch_vnpu.fast_gelu(x, out=out) is out
    torch.testing.assert_close(out.cpu(), fast_gelu_reference(source))
    strided = torch.zeros(6, 4, dtype=torch.float64, device=device).t()
    torch_vnpu.fast_gelu(x, out=strided)
    torch.testing.assert_close(strided.cpu(), fast_gelu_reference(source))
    # Exactly the input, as an in-place kernel: allowed, as on the CPU.
    torch_vnpu.fast_gelu(x, out=x)
    torch.testing.assert_close(x.cpu(), fast_gelu_reference(source))


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_fast_gelu_out_refuses_overlapping_memory_as_the_cpu_does(npu: str, device: str) -> None:
    """Vendor kernels check overlap through torchplug::check_no_overlap, the
    SDK's helper: the same error as torch's own kernels give, on every device."""
    a = torch.arange(8, dtype=torch.float32, device=device)
    before = a.clone()
    with pytest.raises(RuntimeError, match=OVERLAP_ERROR):
        torch_vnpu.fast_gelu(a[:-1], out=a[1:])
    with pytest.raises(
        RuntimeError, match=r"more than one element of the written-to tensor refers"
    ):
        torch_vnpu.fast_gelu(torch.ones(7, 2, device=device), out=a[:7].reshape(7, 1).expand(7, 2))
    square = torch.arange(16, dtype=torch.float32, device=device).reshape(4, 4)
    with pytest.raises(RuntimeError, match=OVERLAP_ERROR):
        torch_vnpu.fast_gelu(square, out=square.t())
    torch.testing.assert_close(a.cpu(), before.cpu())


def test_fast_gelu_out_on_another_device_names_the_fix(npu: str) -> None:
    with pytest.raises(
        RuntimeError, match=r"expected out on npu:0 like input, but it is on cpu.*\.to\("
    ):
        torch_vnpu.fast_gelu(torch.ones(3, device="npu"), out=torch.empty(3))


STRICT_MODE_SCRIPT = """
import torch, torch_vnpu
x = torch.linspace(-2, 2, 12, device="npu").reshape(3, 4).requires_grad_()
w = torch.linspace(0.5, 1.5, 4, device="npu").requires_grad_()
(torch_vnpu.fast_gelu(x).sum() + torch_vnpu.rms_norm(x, w).square().sum()).backward()
print([round(v, 5) for v in x.grad.flatten().tolist() + w.grad.tolist()])
"""


def test_fused_kernels_under_strict_memory_mode(npu: str) -> None:
    """Forward and backward of both fused ops run where host code may not touch
    device memory: the kernels hold torchplug::KernelScope over their tensors."""

    def gradients(strict: str) -> str:
        result = subprocess.run(
            [sys.executable, "-c", STRICT_MODE_SCRIPT],
            capture_output=True,
            text=True,
            env={**os.environ, "TORCHPLUG_PRIVATEUSE1": "npu", "TORCHPLUG_STRICT_MEMORY": strict},
            timeout=180,
            check=False,
        )
        assert "host code read or wrote simulated device memory" not in result.stderr
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.strip()

    assert gradients("1") == gradients("0")
