"""The npu device through `import torch` alone: torch.npu, generated methods, torch.accelerator."""

import subprocess
import textwrap
from pathlib import Path

import torch

from torchplug_testing import child


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter where npu owns PrivateUse1 (plus ``env``)."""
    environment = child.child_environment(
        drop=("TORCHPLUG_", "TORCH_DEVICE_BACKEND_AUTOLOAD"), TORCHPLUG_PRIVATEUSE1="npu", **env
    )
    return child.run_python(code, environment, timeout=180)


def test_device_module_answers(npu: str) -> None:
    assert torch.npu.is_available()
    assert torch.npu.device_count() == 2
    assert torch.npu.current_device() == 0
    with torch.npu.device(1):
        assert torch.npu.current_device() == 1
        assert torch.ones(1, device="npu").device == torch.device("npu", 1)
    assert torch.npu.current_device() == 0
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.npu.get_device_properties(0).total_memory > 0


def test_tensor_and_module_methods(npu: str) -> None:
    x = torch.arange(6.0).reshape(2, 3).npu()
    assert x.is_npu
    assert x.device == torch.device("npu", 0)
    assert not torch.ones(1).is_npu
    torch.testing.assert_close((x * 2).cpu(), torch.arange(6.0).reshape(2, 3) * 2)
    assert torch.ones(2).npu(1).device == torch.device("npu", 1)
    model = torch.nn.Linear(3, 2).npu()
    assert all(p.is_npu for p in model.parameters())
    assert model(x).is_npu


def test_torch_accelerator_is_npu(npu: str) -> None:
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("npu")
    assert torch.accelerator.device_count() == torch.npu.device_count()
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch.npu.current_device() == 1
    finally:
        torch.accelerator.set_device_index(0)
    stream = torch.accelerator.current_stream()
    assert stream.device == torch.device("npu", 0)
    torch.accelerator.synchronize()
    before = torch.accelerator.memory_allocated()
    block = torch.empty(1 << 20, dtype=torch.uint8, device="npu")
    assert torch.accelerator.memory_allocated() >= before + block.numel()


def test_import_torch_alone_activates_npu_and_its_ops() -> None:
    result = run_python(
        """
        import sys
        import torch
        assert "torch_vnpu" in sys.modules  # loaded by torch's entry point, not by us
        print(torch.npu.is_available(), torch.accelerator.current_accelerator())
        print(torch.ops.npu.fast_gelu(torch.zeros(2, device="npu")).tolist())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True npu", "[0.0, 0.0]"]


CHECK_ONE_REGISTRATION = """
    import torch
    import torch_vnpu
    import torchplug
    status = torchplug.statuses()["npu"]
    assert status.active, status.reason
    assert torch._C._get_privateuse1_backend_name() == "npu"
    x = torch.ones(3, device="npu")
    print(torch_vnpu.fast_gelu(x).device, torch.get_device_module("npu") is torch.npu)
"""


def test_explicit_import_before_torch_changes_nothing() -> None:
    result = run_python("import torch_vnpu\n" + textwrap.dedent(CHECK_ONE_REGISTRATION))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "npu:0 True"


def test_explicit_import_after_torch_changes_nothing() -> None:
    result = run_python("import torch\n" + textwrap.dedent(CHECK_ONE_REGISTRATION))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "npu:0 True"


def test_explicit_import_with_autoload_off() -> None:
    result = run_python(
        "import sys\nimport torch\nassert not hasattr(torch, 'npu')\n"
        + textwrap.dedent(CHECK_ONE_REGISTRATION),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "npu:0 True"


def test_checkpoint_round_trip_with_map_location(npu: str, tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pt"
    torch.save({"weight": torch.arange(3.0, device="npu")}, path)
    moved = torch.load(path, map_location="npu:1", weights_only=True)["weight"]
    assert moved.device == torch.device("npu", 1)
    torch.testing.assert_close(moved.cpu(), torch.arange(3.0))
