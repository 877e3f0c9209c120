"""The aliasing CPU fallback: results equal the CPU's for every kind of operator."""

import pytest
import torch


def test_out_of_place_results(device: str) -> None:
    a, b = torch.randn(5, 7), torch.randn(5, 7)
    for fn in (torch.add, torch.mul, torch.atan2, torch.maximum):
        torch.testing.assert_close(fn(a.to(device), b.to(device)).cpu(), fn(a, b))
    torch.testing.assert_close(torch.softmax(a.to(device), dim=1).cpu(), torch.softmax(a, dim=1))


BINARY_ARITHMETIC = [
    pytest.param(lambda a, b: torch.add(a, b, alpha=2), id="add"),
    pytest.param(lambda a, b: torch.sub(a, b, alpha=3), id="sub"),
    pytest.param(torch.mul, id="mul"),
    pytest.param(torch.div, id="div"),
]


@pytest.mark.parametrize("op", BINARY_ARITHMETIC)
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.complex64, torch.int64]
)
def test_binary_arithmetic_runs_cpu_loops_on_device_memory(device: str, op, dtype) -> None:
    """add/sub/mul/div run the CPU loops straight over device tensors: broadcast,
    strided, 0-d and empty operands all give the CPU's result, on the device."""
    make = lambda *shape: torch.randn(*shape).mul(10).to(dtype)  # noqa: E731
    cases = [
        (make(4, 3), make(3)),
        (make(5, 6).t(), make(6, 10)[:, ::2]),
        (make(()), make(2, 2)),
        (make(0, 3), make(3)),
    ]
    for a, b in cases:
        b = b.masked_fill(b == 0, 1)
        result = op(a.to(device), b.to(device))
        assert result.device.type == device
        torch.testing.assert_close(result.cpu(), op(a, b), equal_nan=True)


def test_binary_arithmetic_keeps_cpu_semantics_for_mixed_operands(device: str) -> None:
    floats = torch.tensor([1.0, 2.0, 4.0])
    ints = torch.tensor([1, 2, 3])
    on_device = floats.to(device), ints.to(device)
    assert torch.equal((on_device[1] / on_device[1].flip(0)).cpu(), ints / ints.flip(0))
    assert torch.equal((on_device[0] * on_device[1]).cpu(), floats * ints)
    assert torch.equal((on_device[1] + torch.tensor(0.5)).cpu(), ints + 0.5)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        torch.add(on_device[1], on_device[1], alpha=1.5)
    flags = torch.tensor([True, False], device=device)
    with pytest.raises(NotImplementedError, match="Use the `\\^` or `logical_xor"):
        flags - flags


def test_binary_arithmetic_waits_for_the_current_stream(device: str) -> None:
    stream = torch.foo.Stream()
    host = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    with torch.foo.stream(stream):
        torch.foo._sleep(50)
        copied = host.to(device, non_blocking=True)
        doubled = copied + copied
    torch.foo.current_stream().wait_stream(stream)
    assert torch.equal(doubled.cpu(), host * 2)


def test_in_place_returns_same_tensor_and_writes_device_memory(device: str) -> None:
    x = torch.arange(6.0, device=device)
    y = x.mul_(2)
    assert y is x
    assert x.cpu().tolist() == [0, 2, 4, 6, 8, 10]


def test_in_place_on_view_updates_base(device: str) -> None:
    base = torch.zeros(3, 4, device=device)
    base[:, 1].fill_(5)
    base.t()[2].add_(1)
    expected = torch.zeros(3, 4)
    expected[:, 1] = 5
    expected[:, 2] += 1
    assert torch.equal(base.cpu(), expected)


def test_out_argument_including_resize(device: str) -> None:
    a, b = torch.randn(4, 3, device=device), torch.randn(4, 3, device=device)
    out = torch.empty(4, 3, device=device)
    result = torch.add(a, b, out=out)
    assert result is out
    torch.testing.assert_close(out.cpu(), a.cpu() + b.cpu())
    small = torch.empty(0, device=device)
    torch.mul(a, b, out=small)  # the kernel resizes the out argument
    assert small.shape == (4, 3)
    assert small.device == a.device
    torch.testing.assert_close(small.cpu(), a.cpu() * b.cpu())


def test_views_share_device_memory(device: str) -> None:
    x = torch.arange(12.0, device=device).reshape(3, 4)
    for view in (x.t(), x[1], x.diagonal(), x.unfold(1, 2, 1), x.narrow(0, 1, 2), x.view(-1)):
        assert view.device == x.device
        assert view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    x.diagonal().zero_()
    assert x.cpu().diagonal().tolist() == [0, 0, 0]


def test_multiple_and_list_outputs(device: str) -> None:
    a = torch.randn(6, 5)
    values, indices = torch.sort(a.to(device), dim=1)
    ref_values, ref_indices = torch.sort(a, dim=1)
    assert values.device.type == device
    assert indices.device.type == device
    torch.testing.assert_close(values.cpu(), ref_values)
    assert torch.equal(indices.cpu(), ref_indices)
    chunks = torch.chunk(a.to(device), 3)
    assert [c.cpu().tolist() for c in chunks] == [c.tolist() for c in torch.chunk(a, 3)]
    mins = torch.aminmax(a.to(device))
    assert mins.min.item() == a.min().item()
    assert mins.max.item() == a.max().item()
    u, s, v = torch.linalg.svd(a.to(device), full_matrices=False)
    torch.testing.assert_close((u @ torch.diag(s) @ v).cpu(), a, atol=1e-5, rtol=1e-5)


def test_tensor_list_inputs_and_indexing(device: str) -> None:
    parts = [torch.randn(2, 3) for _ in range(3)]
    torch.testing.assert_close(torch.cat([p.to(device) for p in parts]).cpu(), torch.cat(parts))
    x = torch.arange(10.0)
    index = torch.tensor([1, 3, 5])
    assert x.to(device)[index.to(device)].cpu().tolist() == [1, 3, 5]
    assert x.to(device)[index].cpu().tolist() == [1, 3, 5]  # host indices, as CUDA allows
    y = x.to(device)
    y[x.to(device) > 6] = 0
    assert y.cpu().tolist() == [0, 1, 2, 3, 4, 5, 6, 0, 0, 0]


def test_dtype_conversions_and_scalars(device: str) -> None:
    x = torch.tensor([1.5, -2.5], device=device)
    assert x.to(torch.int32).cpu().tolist() == [1, -2]
    assert (x + 1).cpu().tolist() == [2.5, -1.5]
    assert (x * torch.tensor(2.0)).cpu().tolist() == [3.0, -5.0]  # CPU scalar tensor is fine
    assert x.sum().item() == -1.0
    assert x.to(torch.float64).dtype == torch.float64


def test_autograd_through_fallback(device: str) -> None:
    w = torch.randn(3, 3, requires_grad=True)
    wd = w.detach().to(device).requires_grad_()
    x = torch.randn(4, 3)
    (torch.tanh(x @ w) ** 2).sum().backward()
    (torch.tanh(x.to(device) @ wd) ** 2).sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), w.grad)


def test_random_ops_use_device_generator(device: str) -> None:
    torch.manual_seed(123)
    first = torch.randn(5, device=device).cpu()
    torch.manual_seed(123)
    second = torch.randn(5, device=device).cpu()
    assert torch.equal(first, second)
    generator = torch.Generator(device=device).manual_seed(7)
    a = torch.rand(3, device=device, generator=generator).cpu()
    generator.manual_seed(7)
    b = torch.rand(3, device=device, generator=generator).cpu()
    assert torch.equal(a, b)
    dropped = torch.nn.functional.dropout(torch.ones(1000, device=device), p=0.5)
    assert 300 < int((dropped == 0).sum()) < 700


def test_cross_device_and_host_mix_errors(device: str) -> None:
    a = torch.ones(3, device=f"{device}:0")
    with pytest.raises(
        RuntimeError,
        match=rf"Expected all tensors to be on the same device.*{device}:0 and {device}:1",
    ):
        a + torch.ones(3, device=f"{device}:1")
    with pytest.raises(
        RuntimeError, match=rf"Expected all tensors to be on the same device.*{device}:0 and cpu"
    ):
        a + torch.ones(3)


def test_matmul_kernels_reject_operands_on_other_devices(device: str) -> None:
    # mm and addmm have native kernels that run the CPU kernel over device
    # memory, so they must check devices themselves rather than read a host
    # operand as if it were on the device.
    x = torch.ones(2, 2, device=f"{device}:0")
    host = torch.ones(2, 2)
    other = torch.ones(2, 2, device=f"{device}:1")
    same_device = r"Expected all tensors to be on the same device"
    for call, culprit in (
        (lambda: torch.mm(x, host), "mat2 is on cpu"),
        (lambda: torch.mm(host, x), f"mat2 is on {device}:0"),
        (lambda: torch.mm(x, other), f"mat2 is on {device}:1"),
        (lambda: torch.addmm(host, x, x), f"mat1 is on {device}:0"),
        (lambda: torch.addmm(x, x, host), "mat2 is on cpu"),
        (lambda: torch.addmm(torch.ones((), device=f"{device}:1"), x, x), f"mat1 is on {device}:0"),
    ):
        with pytest.raises(RuntimeError, match=rf"{same_device}.*{culprit}"):
            call()
    torch.testing.assert_close(torch.addmm(x, x, x).cpu(), torch.full((2, 2), 3.0))


def test_invalid_device_index_names_device_count(device: str) -> None:
    count = torch.foo.device_count()
    with pytest.raises(
        RuntimeError, match=rf"Invalid device index 7 for '{device}': there are {count} devices"
    ):
        torch.ones(2, device=f"{device}:7")
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.foo.set_device(9)


def test_cross_device_copy(device: str) -> None:
    x = torch.arange(4.0, device=f"{device}:0")
    y = x.to(f"{device}:1")
    assert y.device.index == 1
    assert y.cpu().tolist() == [0, 1, 2, 3]


def test_convolution_forward_and_backward(device: str) -> None:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1, groups=1)
    transposed = torch.nn.ConvTranspose2d(4, 2, 2, stride=2)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    (transposed(conv(x)) ** 2).mean().backward()
    grads = [x.grad, conv.weight.grad, conv.bias.grad, transposed.weight.grad, transposed.bias.grad]
    expected = [g.clone() for g in grads]
    conv_d, transposed_d = conv.to(device), transposed.to(device)
    for module in (conv_d, transposed_d):
        module.zero_grad()
    xd = x.detach().to(device).requires_grad_()
    (transposed_d(conv_d(xd)) ** 2).mean().backward()
    got = [
        xd.grad,
        conv_d.weight.grad,
        conv_d.bias.grad,
        transposed_d.weight.grad,
        transposed_d.bias.grad,
    ]
    for actual, reference in zip(got, expected, strict=True):
        assert actual.device.type == device
        torch.testing.assert_close(actual.cpu(), reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.float32])
def test_histc_counts_integral_tensors_like_cuda(device: str, dtype: torch.dtype) -> None:
    """The CPU's histc refuses integers, CUDA's counts them; models choose the
    dtype by device type (transformers' MoE loss uses int32 off the CPU)."""
    values = torch.tensor([1, 2, 2, 0, 7, 3, 3, 3, 9])
    for low, high in ((0, 3), (0, 0), (2, 8)):
        counted = torch.histc(values.to(dtype).to(device), bins=4, min=low, max=high)
        assert counted.dtype == dtype
        expected = torch.histc(values.double(), bins=4, min=low, max=high)
        torch.testing.assert_close(counted.cpu(), expected.to(dtype))


def test_zero_tensors_stay_zero_tensors(device: str) -> None:
    """Autograd's memoryless zeros (e.g. sgn's gradient) keep their ZeroTensor key."""
    zeros = torch._efficientzerotensor(3, device=device)
    assert zeros._is_zerotensor()
    assert zeros.device.type == device
    torch.testing.assert_close(zeros.cpu(), torch.zeros(3))
    x = torch.randn(4, device=device, requires_grad=True)
    torch.sgn(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.zeros(4))
