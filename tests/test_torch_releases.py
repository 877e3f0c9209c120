"""Ship once: the published files serve every supported torch release.

The session's release build (conftest.py's `release_dist`) is installed into a
clean virtual environment next to each supported torch release, from the
default index as a user installs it: the core's wheel loads its build for
that torch, torch_foo and vhabana_frameworks auto-load, torch_vnpu's operator
library (built once, on torch's stable ABI) runs on the npu device, doctor
reports every backend active and a conformance slice passes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from user_venv import clean_venv, run, user_environment, uv_install

pytestmark = pytest.mark.slow

# The oldest and the newest supported release (core/pyproject.toml's range).
TORCH_RELEASES = ["2.14.1", "2.15.0"]
DISTRIBUTIONS = ["torchplug", "torch_foo", "vhabana_frameworks", "torch_vnpu", "torchplug-testing"]

AUTOLOAD = """
import json
import torch
import torchplug
from torchplug import _C
print(json.dumps({
    "torch": torch.__version__.split("+")[0],
    "core_build": __import__("pathlib").Path(_C.__file__).parent.name,
    "foo": (torch.ones(2, device="foo") * 3).tolist(),
    "hpu": torch.arange(4.0, device="hpu").sum().item(),
}))
"""

# torch_vnpu's operators on the npu device against their composite
# definitions computed on the CPU in float64, forward and backward.
NPU_OPERATORS = """
import torch
generator = torch.Generator().manual_seed(0)
for dtype, tolerance in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
    x = (torch.randn(6, 32, generator=generator, dtype=torch.float64) * 3).to(dtype)
    weight = (torch.rand(32, generator=generator, dtype=torch.float64) + 0.5).to(dtype)
    grad = torch.randn(6, 32, generator=generator, dtype=torch.float64).to(dtype)
    wide = [t.double().requires_grad_() for t in (x, weight)]
    gelu = wide[0] * torch.sigmoid(1.702 * wide[0])
    (gelu_grad,) = torch.autograd.grad(gelu, wide[0], grad.double())
    norm = wide[0] * torch.rsqrt(wide[0].pow(2).mean(-1, keepdim=True) + 1e-6) * wide[1]
    norm_grads = torch.autograd.grad(norm, wide, grad.double())
    x, weight, grad = x.to("npu"), weight.to("npu"), grad.to("npu")
    grad_x, grad_weight = torch.ops.npu.rms_norm_backward(grad, x, weight, 1e-6)
    results = {
        "fast_gelu": (torch.ops.npu.fast_gelu(x), gelu),
        "fast_gelu_backward": (torch.ops.npu.fast_gelu_backward(grad, x), gelu_grad),
        "rms_norm": (torch.ops.npu.rms_norm(x, weight, 1e-6), norm),
        "rms_norm_backward input": (grad_x, norm_grads[0]),
        "rms_norm_backward weight": (grad_weight, norm_grads[1]),
    }
    for name, (got, want) in results.items():
        assert got.device.type == "npu" and got.dtype == dtype, (name, got.device, got.dtype)
        torch.testing.assert_close(
            got.cpu().double(), want.detach(), rtol=tolerance, atol=tolerance, msg=name
        )
try:
    torch.ops.npu.rms_norm(x, weight[:3], 1e-6)
except RuntimeError as error:
    assert "weight must be 1-D with as many elements as the input's last dimension" in str(error)
else:
    raise AssertionError("a wrong weight was accepted")
print("npu operators ran on torch", torch.__version__)
"""


def run_script(python: Path, code: str, cwd: Path, **env: str) -> str:
    """What ``code`` prints, run as a script by ``python`` in a user's environment."""
    script = cwd / "script.py"
    script.write_text(code)
    return run(python, script, cwd=cwd, env=user_environment(**env))


@pytest.fixture(scope="module")
def local_index(release_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release build's wheels as a package index on disk (the simple
    repository API: a page per normalised project name linking its files)."""
    index = tmp_path_factory.mktemp("index")
    for wheel in release_dist.glob("*.whl"):
        project = index / re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        project.mkdir()  # one wheel per project: the build is for one CPython
        (project / wheel.name).symlink_to(wheel)
        (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    return index


@pytest.fixture(scope="module", params=TORCH_RELEASES)
def user_venv(
    request: pytest.FixtureRequest, local_index: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """(torch release, interpreter) of a clean venv where a user installed that
    torch and every published distribution by name, ours from the local index
    (which uv consults before the default one), torch from the default index."""
    torch_release = request.param
    python = clean_venv(tmp_path_factory.mktemp(f"torch-{torch_release}") / "venv")
    uv_install(
        python, "--index", local_index.as_uri(), f"torch=={torch_release}", *DISTRIBUTIONS,
        cwd=local_index,
    )  # fmt: skip
    return torch_release, python


def test_the_core_loads_its_build_for_the_torch_and_backends_autoload(
    user_venv: tuple[str, Path], tmp_path: Path
) -> None:
    torch_release, python = user_venv
    report = json.loads(run_script(python, AUTOLOAD, tmp_path))
    minor = ".".join(torch_release.split(".")[:2])
    assert report == {
        "torch": torch_release,
        "core_build": f"torch-{minor}",
        "foo": [3.0, 3.0],
        "hpu": 6.0,
    }
    doctor = run(
        python.parent / "torchplug", "doctor", "--json", cwd=tmp_path, env=user_environment()
    )
    statuses = {b["device"]: b["status"] for b in json.loads(doctor)["backends"]}
    assert statuses == {"foo": "active", "hpu": "active", "npu": "inactive"}


def test_vendor_operators_built_once_run_on_the_npu_device(
    user_venv: tuple[str, Path], tmp_path: Path
) -> None:
    torch_release, python = user_venv
    out = run_script(python, NPU_OPERATORS, tmp_path, TORCHPLUG_PRIVATEUSE1="npu")
    assert f"npu operators ran on torch {torch_release}" in out


def test_a_conformance_slice_passes(user_venv: tuple[str, Path], tmp_path: Path) -> None:
    _, python = user_venv
    out = run(
        python.parent / "torchplug", "check", "foo", "--json", "--", "-k", "creation or views",
        cwd=tmp_path, env=user_environment(),
    )  # fmt: skip
    report = json.loads(out)
    assert report["unexpected_failures"] == []
    assert report["groups"]["creation"]["passed"] > 0
    assert report["groups"]["views"]["passed"] > 0
