"""Vendor binaries built once: torch_vnpu's operator library, built against
this workspace's torch through torch's stable ABI (targeting torch 2.14),
loads and runs unchanged in torch 2.14.1."""

from __future__ import annotations

import importlib.util
import sysconfig
from pathlib import Path

import pytest

from user_venv import clean_venv, run, user_environment, uv_install

OLDEST_TORCH = "2.14.1"

# Loads the library by path (no torchplug in that torch: the CPU kernels need
# no core) and compares each operator with its composite definition.
PROBE = """
import sys
import torch

library, expected_version = sys.argv[1], sys.argv[2]
assert torch.__version__.split("+")[0] == expected_version, torch.__version__
torch.ops.load_library(library)
generator = torch.Generator().manual_seed(0)
for dtype, tolerance in ((torch.float64, 1e-12), (torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
    x = (torch.randn(6, 32, generator=generator, dtype=torch.float64) * 3).to(dtype)
    weight = (torch.rand(32, generator=generator, dtype=torch.float64) + 0.5).to(dtype)
    grad = torch.randn(6, 32, generator=generator, dtype=torch.float64).to(dtype)
    wide = [t.double().requires_grad_() for t in (x, weight)]
    gelu = wide[0] * torch.sigmoid(1.702 * wide[0])
    (gelu_grad,) = torch.autograd.grad(gelu, wide[0], grad.double())
    norm = wide[0] * torch.rsqrt(wide[0].pow(2).mean(-1, keepdim=True) + 1e-6) * wide[1]
    norm_grads = torch.autograd.grad(norm, wide, grad.double())
    results = {
        "fast_gelu": (torch.ops.npu.fast_gelu(x), gelu),
        "fast_gelu_backward": (torch.ops.npu.fast_gelu_backward(grad, x), gelu_grad),
        "rms_norm": (torch.ops.npu.rms_norm(x, weight, 1e-6), norm),
    }
    grad_x, grad_weight = torch.ops.npu.rms_norm_backward(grad, x, weight, 1e-6)
    results["rms_norm_backward input"] = (grad_x, norm_grads[0])
    results["rms_norm_backward weight"] = (grad_weight, norm_grads[1])
    for name, (got, want) in results.items():
        assert got.dtype == dtype, (name, got.dtype)
        torch.testing.assert_close(got.double(), want.detach(), rtol=tolerance, atol=tolerance, msg=name)
try:
    torch.ops.npu.rms_norm(x, weight[:3], 1e-6)
except RuntimeError as error:
    assert "weight must be 1-D with as many elements as the input's last dimension" in str(error)
else:
    raise AssertionError("a wrong weight was accepted")
print("npu operators ran on torch", torch.__version__)
"""


@pytest.mark.slow
def test_vendor_operators_built_once_run_on_the_oldest_supported_torch(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("torch_vnpu._C")
    assert spec is not None
    assert spec.origin, "torch_vnpu's extension is not built"
    python = clean_venv(tmp_path / "venv")
    # Only torch itself is installed, and the one CUDA library its wheel loads
    # that the workspace's torch no longer needs (cuRAND, which torch 2.14.1's
    # cuda-toolkit 13.0.3 pins); the rest of its dependencies (sympy, the
    # other CUDA libraries, ...) come from the workspace's environment,
    # appended after the venv's own packages, so the venv's torch is the one imported.
    uv_install(python, "--no-deps", f"torch=={OLDEST_TORCH}", "nvidia-curand==10.4.0.35")
    site_packages = next((tmp_path / "venv").glob("lib/python*/site-packages"))
    (site_packages / "workspace_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    environment = user_environment(TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = run(python, script, spec.origin, OLDEST_TORCH, env=environment)
    assert f"npu operators ran on torch {OLDEST_TORCH}" in out
