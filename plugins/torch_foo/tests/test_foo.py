"""The tutorial backend, end to end, through `import torch` alone."""

import subprocess

import torch

from torchplug_testing import child


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return child.run_python(code, child.child_environment(**env), timeout=120)


def test_readme_snippet_in_fresh_interpreter() -> None:
    result = run_python(
        """
        import sys
        import torch
        assert "torch_foo" in sys.modules  # loaded by torch, not by us
        print(torch.foo.is_available())
        print(repr(torch.tensor([1, 2, 3], device="foo")))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", "tensor([1, 2, 3], device='foo:0')"]


def test_autoload_switch_off_then_explicit_import() -> None:
    result = run_python(
        """
        import sys
        import torch
        assert not hasattr(torch, "foo") and "torch_foo" not in sys.modules
        import torch_foo
        print(torch.ones(2, device="foo").sum().item())
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2.0"


def _losses(device: str, steps: int = 5) -> list[float]:
    """The losses of an MLP's SGD steps on ``device``: the model and the data are
    made on the CPU from one seed, so that every device starts from the same values."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 4),
    ).to(device)
    inputs = torch.randn(64, 16).to(device)
    targets = torch.randint(0, 4, (64,)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        return loss

    return [optimizer.step(closure).item() for _ in range(steps)]


def test_mlp_training_matches_cpu() -> None:
    cpu = _losses("cpu")
    foo = _losses("foo")
    assert cpu[-1] < cpu[0]  # it really trains
    torch.testing.assert_close(foo, cpu, rtol=1e-5, atol=1e-6)


def test_module_and_tensor_methods_generated() -> None:
    x = torch.ones(3).foo()
    assert x.is_foo
    assert x.device == torch.device("foo", 0)
    model = torch.nn.Linear(2, 2).foo()
    assert next(model.parameters()).is_foo
