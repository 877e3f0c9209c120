"""The hot operators that run the CPU's own kernels over device tensors
(native_kernels.cpp) equal the CPU to the bit, forward and backward, in-place
and out= (the optimizers' steps), on every path: contiguous and strided, each
dtype (integers promoted to float, bf16 with a number), strict mode (the
fallback); and they never change CPU state behind the user's back."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from device_matrix import active_devices, rerun_as_owner
from torchplug_testing.child import child_environment, run_python

Op = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _classes(y: torch.Tensor) -> torch.Tensor:
    """Class indices for 5 samples over 37 classes, on y's device."""
    return (y[0, :, 0].detach().abs() * 10).long() % 37


OPS: dict[str, Op] = {
    "pow 2": lambda x, y: x.pow(2),
    "pow 3.0": lambda x, y: x.pow(3.0),
    "pow 0": lambda x, y: x.pow(0),
    "pow 1": lambda x, y: x.pow(1),
    "rsqrt": lambda x, y: x.abs().add(1).rsqrt(),
    "sqrt": lambda x, y: x.abs().sqrt(),
    "neg": lambda x, y: -x,
    "exp": lambda x, y: x.exp(),
    "log": lambda x, y: x.abs().add(1).log(),
    "sin": lambda x, y: x.sin(),
    "cos": lambda x, y: x.cos(),
    "sigmoid": lambda x, y: x.sigmoid(),
    "tanh": lambda x, y: x.tanh(),
    "silu": lambda x, y: F.silu(x),
    "relu": lambda x, y: F.relu(x),
    "clamp_min": lambda x, y: x.clamp_min(0.1),
    "gelu": lambda x, y: F.gelu(x),
    "softmax": lambda x, y: x.softmax(-1),
    "softmax dim 0": lambda x, y: x.softmax(0),
    "log_softmax": lambda x, y: x.log_softmax(-1),
    "layer_norm": lambda x, y: F.layer_norm(x, x.shape[-1:]),
    "layer_norm affine": lambda x, y: F.layer_norm(x, x.shape[-1:], y[0, 0], y[0, 1]),
    "bmm": lambda x, y: torch.bmm(x, y.transpose(1, 2)),
    "mm": lambda x, y: x[0] @ y[0].t(),
    "addmm": lambda x, y: torch.addmm(y[0, 0, :5], x[0], y[0].t()),
    "sum": lambda x, y: x.sum(-1),
    "sum keepdim": lambda x, y: x.sum((0, 2), keepdim=True),
    "sum as float64": lambda x, y: x.sum(1, dtype=torch.float64),
    "sum of integers": lambda x, y: (x * 10).long().sum(-1),
    "nll_loss": lambda x, y: F.nll_loss(x[0].log_softmax(-1), _classes(y)),
    "nll_loss weighted, ignored, unreduced": lambda x, y: F.nll_loss(
        x[0].log_softmax(-1),
        _classes(y),
        weight=y[1, 0].detach().abs(),
        ignore_index=3,
        reduction="none",
    ),
    "mul number": lambda x, y: x * 0.9,
    "add number": lambda x, y: x + 0.3,
    "mul 0-dim tensor": lambda x, y: x * y[0, 0, 0].double(),
}
FLOATING = (torch.float32, torch.float64, torch.bfloat16)
UNARY_FLOAT = ("pow 3.0", "rsqrt", "sqrt", "exp", "log", "sin", "cos", "sigmoid")


def _inputs(dtype: torch.dtype, transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x, y = (torch.randn(3, 5, 37, generator=generator, dtype=dtype) for _ in range(2))
    if transposed:
        x, y = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (x, y))
    return x, y


def _run(
    op: Op, x: torch.Tensor, y: torch.Tensor, device: str, backward: bool
) -> list[torch.Tensor]:
    x = x.detach().to(device).requires_grad_(backward)
    y = y.detach().to(device).requires_grad_(backward)
    out = op(x, y)
    if not out.requires_grad:
        return [out]
    out.backward(torch.full_like(out, 0.37))
    return [out] + [t.grad for t in (x, y) if t.grad is not None]


def _assert_bitwise(expected: list[torch.Tensor], got: list[torch.Tensor]) -> None:
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype
        assert have.stride() == want.stride() or want.numel() <= 1
        torch.testing.assert_close(have.cpu(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("device", active_devices())
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("name", OPS)
def test_equals_the_cpu_bitwise(
    device: str, name: str, dtype: torch.dtype, transposed: bool
) -> None:
    x, y = _inputs(dtype, transposed)
    backward = device != "hpu"  # torch CUDA builds cannot run autograd on HPU
    _assert_bitwise(_run(OPS[name], x, y, "cpu", backward), _run(OPS[name], x, y, device, backward))


@pytest.mark.parametrize("device", active_devices())
@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_integer_inputs_promote_as_on_the_cpu(device: str, name: str) -> None:
    x = torch.arange(-6, 6).reshape(3, 4)
    expected = OPS[name](x, x)
    assert expected.dtype == torch.float32
    _assert_bitwise([expected], [OPS[name](x.to(device), x.to(device))])


@pytest.mark.parametrize("device", active_devices())
def test_double_scalar_tensor_operand_is_cast(device: str) -> None:
    grad = torch.randn(4, 5)
    output = torch.rand(4, 5)
    scalar = torch.tensor(0.5, dtype=torch.float64)
    expected = torch.ops.aten.tanh_backward(grad, output * scalar)
    got = torch.ops.aten.tanh_backward(grad.to(device), output.to(device) * scalar)
    _assert_bitwise([expected], [got])


@pytest.mark.parametrize("device", active_devices())
def test_reduced_precision_bmm_keeps_onednn_on_for_the_cpu(device: str) -> None:
    """The CPU hands bf16 bmm to oneDNN, which refuses device tensors and, when
    it does, warns and turns oneDNN off for the whole process."""
    a = torch.randn(2, 4, 8, dtype=torch.bfloat16)
    b = torch.randn(2, 8, 3, dtype=torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = torch.bmm(a.to(device), b.to(device))
    assert torch._C._get_mkldnn_enabled()
    _assert_bitwise([torch.bmm(a, b)], [got])


@pytest.mark.parametrize("device", active_devices())
def test_operands_on_two_devices_are_refused(device: str) -> None:
    x = torch.randn(2, 3, 3, device=device)
    with pytest.raises(RuntimeError, match=r"same device.*mat2 is on cpu"):
        torch.bmm(x, torch.randn(2, 3, 3))
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.aten.tanh_backward(x, torch.randn(2, 3, 3))


@pytest.mark.parametrize("device", active_devices())
def test_strict_mode_takes_the_fallback_with_the_same_results(device: str) -> None:
    code = f"""
        import torch, torch.nn.functional as F
        x = torch.randn(3, 5, 7)
        ops = [
            lambda t: t.pow(2), lambda t: t.exp(), lambda t: t.softmax(-1), lambda t: F.silu(t).sum(-1),
            lambda t: torch.bmm(t, t.transpose(1, 2)), lambda t: F.layer_norm(t, (7,)),
        ]
        for op in ops:
            assert torch.equal(op(x.to("{device}")).cpu(), op(x))
        print("ok")
    """
    owner = {"TORCHPLUG_PRIVATEUSE1": device} if device in ("foo", "npu") else {}
    result = run_python(code, child_environment(TORCHPLUG_STRICT_MEMORY="1", **owner))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")


IN_PLACE: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object]] = {
    "lerp_": lambda s, a, b: s.lerp_(a, 0.1),
    "addcmul_": lambda s, a, b: s.addcmul_(a, b, value=0.3),
    "addcdiv_": lambda s, a, b: s.addcdiv_(a, b.abs().add(1), value=-0.2),
    "div_ number": lambda s, a, b: s.div_(1.7),
    "div_ tensor": lambda s, a, b: s.div_(b.abs().add(1)),
    "mul_ number": lambda s, a, b: s.mul_(0.9),
    "mul out=self": lambda s, a, b: torch.mul(a, b, out=s),
    "mul out= to resize": lambda s, a, b: torch.mul(a, b, out=s[:0]),
    "broadcast into self": lambda s, a, b: s[:1].addcmul_(a, b),
    "mixed dtypes": lambda s, a, b: s.addcmul_(a.double(), b),
    "strided self": lambda s, a, b: s.t().lerp_(a.t(), 0.5),
    "mm out=": lambda s, a, b: torch.mm(a, b, out=s),
    "mm out= slice": lambda s, a, b: torch.mm(a[:3], b, out=s[:3]),
    "mm out= to resize": lambda s, a, b: torch.mm(a[:3], b, out=s[:0]),
    "addmm out=": lambda s, a, b: torch.addmm(b[0], a, b, beta=0.5, alpha=2, out=s),
    "addmm out= strided": lambda s, a, b: torch.addmm(b, a, b.t(), out=s.t()),
    "addmm out= to resize": lambda s, a, b: torch.addmm(b[:3, :1], a[:3], b, out=s[:0]),
    "grouped mm": lambda s, a, b: s.copy_(
        torch._grouped_mm(
            a, b.t().reshape(2, 6, 3), offs=torch.tensor([3, 6], device=a.device).int()
        ).reshape(6, 6)
    ),
    "fill_": lambda s, a, b: s.fill_(0.3),
    "fill_ strided": lambda s, a, b: s[::2, 1:].fill_(-2),
    "fill_ one element": lambda s, a, b: s[1, 1].fill_(7),
    "fill_ conjugate view": lambda s, a, b: s.conj().fill_(1.5),
}


@pytest.mark.parametrize("device", active_devices())
@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_and_out_equal_the_cpu(device: str, name: str, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(1)
    tensors = [torch.randn(6, 6, generator=generator, dtype=dtype) for _ in range(3)]

    def run(on: str) -> tuple[torch.Tensor, str]:
        self, a, b = (t.to(on, copy=True) for t in tensors)
        try:
            IN_PLACE[name](self, a, b)
        except RuntimeError as error:
            return self.cpu(), str(error).split("(")[0]
        return self.cpu(), ""

    expected, expected_error = run("cpu")
    got, error = run(device)
    assert error == expected_error
    _assert_bitwise([expected], [got])


@pytest.mark.parametrize("device", active_devices())
@pytest.mark.parametrize("optimizer", ["AdamW", "SGD", "Adam"])
def test_foreach_optimizer_step_equals_the_cpus_bitwise(device: str, optimizer: str) -> None:
    """The optimizers' foreach path (the default on a device) runs the
    in-place kernels above once per parameter."""
    generator = torch.Generator().manual_seed(0)
    shapes = [(16, 8), (16,), (4, 16), (4,)]
    initial = [torch.randn(shape, generator=generator) for shape in shapes]
    gradients = [[torch.randn(shape, generator=generator) for shape in shapes] for _ in range(3)]
    final = {}
    for on in ("cpu", device):
        parameters = [torch.nn.Parameter(tensor.to(on, copy=True)) for tensor in initial]
        options = {"momentum": 0.9} if optimizer == "SGD" else {}
        step = getattr(torch.optim, optimizer)(parameters, lr=0.01, foreach=True, **options)
        for grads in gradients:
            for parameter, grad in zip(parameters, grads, strict=True):
                parameter.grad = grad.to(on)
            step.step()
        final[on] = [parameter.detach() for parameter in parameters]
    _assert_bitwise(final["cpu"], final[device])
