"""Sparse COO and compressed (CSR/CSC/BSR) tensors on the device, through the CPU's sparse kernels."""

import re

import pytest
import torch

from device_matrix import active_devices, rerun_as_owner, with_backward

DEVICES = active_devices()
# Upstream builds compressed (CSR, CSC, BSR, BSC) tensors on CPU, CUDA, Meta
# and PrivateUse1 only: torch refuses them on the in-tree HPU key.
COMPRESSED_DEVICES = [d for d in DEVICES if d != "hpu"]


def dense_sample() -> torch.Tensor:
    return torch.tensor([[0.0, 1.5, 0.0, 0.0], [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, -4.0]])


def assert_sparse_equal(on_device: torch.Tensor, on_cpu: torch.Tensor, device: str) -> None:
    assert on_device.device.type == device
    assert on_device.layout == on_cpu.layout
    torch.testing.assert_close(on_device.cpu().to_dense(), on_cpu.to_dense(), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_coo_conversions(device: str) -> None:
    x = dense_sample()
    d = x.to(device)
    assert_sparse_equal(d.to_sparse(), x.to_sparse(), device)
    assert_sparse_equal(x.to_sparse().to(device), x.to_sparse(), device)
    torch.testing.assert_close(d.to_sparse().to_dense().cpu(), x)
    assert d.to_sparse().cpu().layout == torch.sparse_coo
    for other in DEVICES:
        assert_sparse_equal(d.to_sparse().to(other), x.to_sparse(), other)


@pytest.mark.parametrize("device", COMPRESSED_DEVICES)
def test_compressed_conversions(device: str) -> None:
    x = dense_sample()
    d = x.to(device)
    assert_sparse_equal(d.to_sparse_csr(), x.to_sparse_csr(), device)
    assert_sparse_equal(d.to_sparse_csc(), x.to_sparse_csc(), device)
    assert_sparse_equal(d.to_sparse_bsr((1, 2)), x.to_sparse_bsr((1, 2)), device)
    assert_sparse_equal(x.to_sparse_csr().to(device), x.to_sparse_csr(), device)
    torch.testing.assert_close(d.to_sparse_csr().to_dense().cpu(), x)
    csr = x.to_sparse_csr().to(device)
    assert csr.crow_indices().device.type == device
    torch.testing.assert_close(csr.col_indices().cpu(), x.to_sparse_csr().col_indices())


def test_compressed_layouts_on_hpu_raise_torchs_error() -> None:
    if "hpu" not in DEVICES:
        pytest.skip("hpu is not active here")
    with pytest.raises(NotImplementedError, match="new_compressed_tensor"):
        dense_sample().to("hpu").to_sparse_csr()


@pytest.mark.parametrize("device", DEVICES)
def test_parts_and_construction(device: str) -> None:
    x = dense_sample().to_sparse()
    d = x.to(device)
    assert (d._nnz(), d.sparse_dim(), d.dense_dim()) == (x._nnz(), 2, 0)
    assert d.is_coalesced()
    assert (d.indices().device.type, d.values().device.type) == (device, device)
    torch.testing.assert_close(d.values().cpu(), x.values())
    built = torch.sparse_coo_tensor(
        torch.tensor([[0, 1, 1], [2, 0, 0]], device=device),
        torch.tensor([1.0, 2.0, 3.0], device=device),
        (2, 3),
    )
    assert not built.is_coalesced()
    assert_sparse_equal(built.coalesce(), built.cpu().coalesce(), device)
    assert built.coalesce().is_coalesced()


@pytest.mark.parametrize("device", DEVICES)
def test_coo_operators_equal_the_cpu(device: str) -> None:
    x = dense_sample()
    weights = torch.randn(4, 5)
    coo, d_coo = x.to_sparse(), x.to_sparse().to(device)
    d_weights = weights.to(device)
    torch.testing.assert_close(
        torch.sparse.mm(d_coo, d_weights).cpu(), torch.sparse.mm(coo, weights)
    )
    torch.testing.assert_close(torch.sparse.sum(d_coo).cpu(), torch.sparse.sum(coo))
    assert_sparse_equal(torch.sparse.sum(d_coo, dim=0), torch.sparse.sum(coo, dim=0), device)
    assert_sparse_equal(d_coo + d_coo, coo + coo, device)
    assert_sparse_equal(d_coo * 3, coo * 3, device)
    assert_sparse_equal(d_coo.clone(), coo.clone(), device)
    accumulated = torch.zeros(3, 4, device=device).add_(d_coo)
    torch.testing.assert_close(accumulated.cpu(), x)


@pytest.mark.parametrize("device", COMPRESSED_DEVICES)
def test_compressed_operators_equal_the_cpu(device: str) -> None:
    x = dense_sample()
    weights = torch.randn(4, 5)
    csr, d_csr = x.to_sparse_csr(), x.to_sparse_csr().to(device)
    torch.testing.assert_close((d_csr @ weights.to(device)).cpu(), csr @ weights)
    assert_sparse_equal(d_csr * 2, csr * 2, device)
    assert_sparse_equal(d_csr.clone(), csr.clone(), device)
    mask = torch.ones(3, 3).to_sparse_csr()
    a, b = torch.randn(3, 4), torch.randn(4, 3)
    expected = torch.sparse.sampled_addmm(mask, a, b)
    on_device = torch.sparse.sampled_addmm(mask.to(device), a.to(device), b.to(device))
    assert_sparse_equal(on_device, expected, device)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_updates_of_sparse_tensors(device: str) -> None:
    x = dense_sample().to_sparse()
    target = torch.zeros(3, 4).to_sparse().to(device)
    target.copy_(x.to(device))
    assert_sparse_equal(target, x, device)
    target.mul_(2)
    assert_sparse_equal(target, x * 2, device)
    target.zero_()
    assert target._nnz() == 0


@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_sparse_embedding_trains_with_sparse_adam_like_the_cpu(device: str) -> None:
    def train(where: str) -> tuple[list[float], torch.Tensor]:
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(10, 4, sparse=True).to(where)
        optimizer = torch.optim.SparseAdam(embedding.parameters(), lr=0.1)
        losses = []
        for step in range(3):
            optimizer.zero_grad()
            tokens = torch.tensor([step, 3, 7, step], device=where)
            loss = embedding(tokens).pow(2).sum()
            loss.backward()
            assert embedding.weight.grad.layout == torch.sparse_coo
            optimizer.step()
            losses.append(loss.item())
        return losses, embedding.weight.detach().cpu()

    device_losses, device_weight = train(device)
    cpu_losses, cpu_weight = train("cpu")
    assert device_losses == pytest.approx(cpu_losses, abs=1e-6)
    torch.testing.assert_close(device_weight, cpu_weight)


@pytest.mark.parametrize("device", DEVICES)
def any_sparse_backend(message: str) -> str:
    return re.sub(r"'Sparse\w+' backend", "'Sparse...' backend", message)


def test_sparse_errors_match_the_cpu(device: str) -> None:
    coo = dense_sample().to_sparse()
    with pytest.raises(RuntimeError) as on_cpu:
        coo.view(-1)
    with pytest.raises(RuntimeError) as on_device:
        coo.to(device).view(-1)
    # The same error, naming the device's sparse backend as CUDA's names SparseCUDA.
    device_line = str(on_device.value).split("\n")[0]
    assert "'SparseCPU'" not in device_line
    assert any_sparse_backend(device_line) == any_sparse_backend(str(on_cpu.value).split("\n")[0])
    with pytest.raises(RuntimeError, match="same device"):
        torch.sparse.mm(coo.to(device), torch.randn(4, 2))


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("device", with_backward(COMPRESSED_DEVICES))
def test_sparse_mm_reductions_backward_like_the_cpu(device: str, reduce: str) -> None:
    """The CPU kernel saves what amax/amin's backward needs only when an input
    requires grad: the host aliases must say so (this crashed the process)."""

    def run(where: str, sparse_requires_grad: bool) -> list[torch.Tensor]:
        generator = torch.Generator().manual_seed(0)
        sparse = torch.randn(5, 5, generator=generator).relu().to_sparse_csr().to(where)
        sparse.requires_grad_(sparse_requires_grad)
        dense = torch.randn(5, 3, generator=generator).to(where).requires_grad_()
        result = torch.sparse.mm(sparse, dense, reduce)
        result.sum().backward()
        grads = [dense.grad.cpu()]
        if sparse_requires_grad:
            grads.append(sparse.grad.to_dense().cpu())
        return [result.cpu(), *grads]

    for sparse_requires_grad in (True, False):
        on_device, on_cpu = run(device, sparse_requires_grad), run("cpu", sparse_requires_grad)
        for device_result, cpu_result in zip(on_device, on_cpu, strict=True):
            torch.testing.assert_close(device_result, cpu_result)
