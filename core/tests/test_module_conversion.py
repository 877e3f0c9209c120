"""nn.Module conversions keep Parameter identity on every device, as they do on CUDA.

Module._apply moves a parameter in place (`param.data = moved`) only when
torch says the CPU and device tensors are shallow-copy compatible; otherwise
it creates new Parameters, and weights tied across modules come apart.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

from device_matrix import active_devices, rerun_as_owner, with_backward

DEVICES = active_devices()


def tied_model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Module()
    model.embedding = torch.nn.Embedding(4, 3)
    model.head = torch.nn.Linear(3, 4, bias=False)
    model.head.weight = model.embedding.weight
    return model


@pytest.mark.parametrize("device", DEVICES)
def test_to_device_keeps_tied_weights_tied(device: str) -> None:
    model = tied_model()
    weight = model.embedding.weight
    model.to(device)
    assert model.embedding.weight is model.head.weight
    assert model.embedding.weight is weight
    assert weight.device.type == device
    model.cpu()
    assert model.embedding.weight is model.head.weight is weight
    assert weight.device.type == "cpu"


@pytest.mark.parametrize("device", DEVICES)
def test_device_named_module_method_keeps_identity(device: str) -> None:
    model = tied_model()
    weight = model.head.weight
    getattr(model, device)()
    assert model.head.weight is weight is model.embedding.weight
    assert weight.device.type == device


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_move_with_their_parameters(device: str) -> None:
    model = torch.nn.Linear(3, 2)
    model(torch.randn(4, 3)).sum().backward()
    grad = model.weight.grad
    expected = grad.clone()
    model.to(device)
    assert model.weight.grad is grad
    assert grad.device.type == device
    torch.testing.assert_close(grad.cpu(), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_shallow_copy_compatibility_answers_as_for_cuda(device: str) -> None:
    host, on_device = torch.ones(2), torch.ones(2, device=device)
    assert torch._has_compatible_shallow_copy_type(host, on_device)
    assert torch._has_compatible_shallow_copy_type(on_device, host)
    assert torch._has_compatible_shallow_copy_type(on_device, on_device)
    assert not torch._has_compatible_shallow_copy_type(host.to_sparse(), on_device)


@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_assigning_data_across_devices(device: str) -> None:
    param = torch.nn.Parameter(torch.randn(3))
    param.data = torch.arange(3.0, device=device)
    assert param.device.type == device
    assert param.requires_grad
    (param * 2).sum().backward()
    assert param.grad.device.type == device
    torch.testing.assert_close(param.grad.cpu(), torch.full((3,), 2.0))
    param.data = torch.zeros(3)
    assert param.device.type == "cpu"


@pytest.mark.parametrize("device", DEVICES)
def test_a_refused_assignment_leaves_the_tensor_as_it_was(device: str) -> None:
    param = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(RuntimeError, match="floating point or complex"):
        param.data = torch.ones(3, dtype=torch.int64, device=device)
    assert param.device.type == "cpu"
    torch.testing.assert_close(param.detach() + 1, torch.full((3,), 2.0))


@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_tied_model_trains_as_on_the_cpu(device: str) -> None:
    def train(model: torch.nn.Module, where: str) -> list[float]:
        model.to(where)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
        tokens = torch.tensor([0, 1, 2, 3, 1], device=where)
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            logits = model.head(model.embedding(tokens))
            loss = torch.nn.functional.cross_entropy(logits, tokens)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    assert train(tied_model(), device) == pytest.approx(train(tied_model(), "cpu"), abs=1e-6)


def test_a_backend_declared_outside_the_workspace_keeps_ties(tmp_path) -> None:
    """Any PrivateUse1 backend built on torchplug gets the fix, declared by nothing more."""
    script = textwrap.dedent(
        """
        import torch
        from torchplug import Backend

        status = Backend(name="bar", distribution="torch_bar").autoload()
        assert status.active, status.reason
        m = torch.nn.Module(); m.a = torch.nn.Embedding(4, 3); m.b = torch.nn.Linear(3, 4, bias=False)
        m.b.weight = m.a.weight
        m.to("bar")
        assert m.a.weight is m.b.weight and m.a.weight.device.type == "bar"
        """
    )
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PATH": "/usr/bin:/bin"}
    completed = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
