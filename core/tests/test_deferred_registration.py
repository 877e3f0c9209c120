"""A device type's kernels are registered at its first tensor, not in ``import torch``.

Each scenario runs in a fresh interpreter: what it checks is what happens
before and at the first tensor of a device type.
"""

import os
import subprocess
import sys
import textwrap

import pytest

# Device name and the dispatch key torch names its kernels by.
DEVICES = [("foo", "PrivateUse1"), ("hpu", "HPU")]


def run(code: str, device: str, key: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", f"DEVICE, KEY = {device!r}, {key!r}\n" + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        env=os.environ,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.parametrize(("device", "key"), DEVICES)
def test_import_registers_what_makes_the_first_tensor(device: str, key: str) -> None:
    out = run(
        """
        import torch
        has = torch._C._dispatch_has_kernel_for_dispatch_key
        print(has("aten::empty.memory_format", KEY), has("aten::add.Tensor", KEY))
        torch.ones(2, device=DEVICE)
        print(has("aten::add.Tensor", KEY))
        """,
        device,
        key,
    )
    assert out == ["True", "False", "True"]


@pytest.mark.parametrize(("device", "key"), DEVICES)
def test_the_first_operator_may_be_a_factory_given_only_the_device(device: str, key: str) -> None:
    out = run(
        """
        import torch
        torch.manual_seed(0)
        on_device = torch.randperm(9, device=DEVICE).cpu()
        torch.manual_seed(0)
        print(torch.equal(on_device, torch.randperm(9)))
        print((torch.arange(3, device=DEVICE) * 2).cpu().tolist())
        print(torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", KEY))
        """,
        device,
        key,
    )
    assert out == ["True", "[0,", "2,", "4]", "True"]


@pytest.mark.parametrize(("device", "key"), DEVICES)
def test_a_kernel_given_before_the_first_tensor_is_kept(device: str, key: str) -> None:
    # torchplug's own neg kernel comes later, at the first tensor: it must not
    # shadow the one the user gave, as it would not have after import torch.
    out = run(
        """
        import torch
        library = torch.library.Library("aten", "IMPL")
        library.impl("neg", lambda x: torch.full_like(x.cpu(), 42.0).to(x.device), KEY)
        print(torch.neg(torch.ones(2, device=DEVICE)).cpu().tolist())
        """,
        device,
        key,
    )
    assert out == ["[42.0,", "42.0]"]


@pytest.mark.parametrize(("device", "key"), DEVICES)
def test_autocast_entered_before_the_first_tensor(device: str, key: str) -> None:
    out = run(
        """
        import torch
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            x = torch.randn(4, 4, device=DEVICE)
            print((x @ x).dtype, torch.relu(x).dtype)
        """,
        device,
        key,
    )
    assert out == ["torch.bfloat16", "torch.float32"]


def test_tensors_without_allocated_memory_come_after_registration() -> None:
    out = run(
        """
        import torch
        zero = torch._efficientzerotensor(3, device=DEVICE)
        print((zero + 1).cpu().tolist())
        """,
        "foo",
        "PrivateUse1",
    )
    assert out == ["[1.0,", "1.0,", "1.0]"]
    out = run(
        """
        import torch
        empty = torch.empty(2, 2, layout=torch.sparse_coo, device=DEVICE)
        print(empty.coalesce().to_dense().cpu().tolist())
        """,
        "foo",
        "PrivateUse1",
    )
    assert out == ["[[0.0,", "0.0],", "[0.0,", "0.0]]"]
