"""A device whose memory the host cannot address (a discrete device).

Two stand in for one: the remote driver, whose device memory lives in the
device process it starts, and the simulator with its host-addressable
capability hidden, under strict memory, where each allocation faults when the
host touches it. The checks below pass on each only if every byte moves
through the driver's copies: the copies, ``item()``, the copying CPU fallback
(views, in-place, ``out=``), training, serialization and the fallback report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distributed_launch import assert_ok, run_ranks

CHECKS = Path(__file__).with_name("discrete_checks.py")
DISCRETE = {
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
    "TORCHPLUG_PRIVATEUSE1": "dsc",
    "TORCHPLUG_STRICT_MEMORY": "1",
}
ENVIRONMENT = {**os.environ, **DISCRETE}


def _run(arguments: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module", params=["remote", "hidden"])
def results(request: pytest.FixtureRequest) -> dict[str, dict]:
    completed = _run([str(CHECKS), request.param], ENVIRONMENT)
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    return {line["check"]: line for line in lines}


def test_the_backend_activates(results: dict[str, dict]) -> None:
    assert results["active"]["ok"], results["active"]["detail"]
    assert results["memory_is_not_host_addressable"]["ok"]


@pytest.mark.parametrize(
    "check",
    [
        "copies_round_trip",
        "copies_into_strided_destinations",
        "operators_match_the_cpu",
        "in_place_views_and_out",
        "training_matches_the_cpu",
        "device_kernels_run_on_the_device",
        "matrix_products_match_the_cpu",
        "optimizer_steps_run_on_the_device",
        "layer_norm_matches_the_cpu",
        "embeddings_match_the_cpu",
        "indexing_runs_on_the_device",
        "strided_copies_run_on_the_device",
        "dropout_runs_on_the_device",
        "attention_masks_and_fills_run_on_the_device",
        "attention_runs_on_the_device",
        "broadcasts_powers_and_batched_products_match_the_cpu",
        "convolution_and_batch_norm_match_the_cpu",
        "lstm_trains",
        "serialization_round_trip",
        "fallback_report_counts_the_copies",
        "user_mistakes_fail_clearly",
        "sharing_between_processes_is_refused_clearly",
        "the_sanitizer_watches_the_streams",
        "compiled_code_runs_on_the_device",
    ],
)
def test_check_passes(results: dict[str, dict], check: str) -> None:
    assert results[check]["ok"], results[check]["detail"]


def test_host_access_and_unsupported_paths_fail_clearly(results: dict[str, dict]) -> None:
    numpy, sparse = results["host_access_is_refused_clearly"]["detail"]
    assert "Use Tensor.cpu()" in numpy
    assert "sparse tensor, which is not supported yet on dsc:0" in sparse


@pytest.mark.parametrize("isa", ["avx2", "baseline"])
def test_matrix_products_under_each_instruction_set(isa: str) -> None:
    """The product's narrower tile shapes, which a machine with AVX-512 never picks itself."""
    check = "matrix_products_match_the_cpu"
    completed = _run(
        [str(CHECKS), "hidden", check], {**ENVIRONMENT, "TORCHPLUG_DEVICE_KERNEL_ISA": isa}
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    (line,) = [json.loads(line) for line in completed.stdout.splitlines() if check in line]
    assert line["ok"], line["detail"]


def test_an_unknown_instruction_set_fails_the_product_clearly() -> None:
    script = textwrap.dedent(
        """
        import torch
        from torchplug import Backend
        Backend(name="dsc", driver_options="hidden_capabilities=1").autoload()
        a = torch.ones(3, 3, device="dsc")
        try:
            (a @ a).cpu()
        except RuntimeError as error:
            print(error)
        print((a + a).cpu().sum().item())
        """
    )
    completed = _run(["-c", script], {**ENVIRONMENT, "TORCHPLUG_DEVICE_KERNEL_ISA": "avx1024"})
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "TORCHPLUG_DEVICE_KERNEL_ISA=avx1024, which is none of baseline, avx2, avx512" in (
        completed.stdout
    )
    assert completed.stdout.strip().endswith("18.0")


@pytest.mark.parametrize(
    ("image_format", "reason"),
    [(None, "loads no kernel modules"), ("vendor-isa-3", "loads images of format 'vendor-isa-3'")],
)
def test_compile_names_the_way_out_when_the_device_cannot_load_generated_code(
    monkeypatch: pytest.MonkeyPatch, image_format: str | None, reason: str
) -> None:
    from torchplug import _C
    from torchplug.inductor import device_code

    monkeypatch.setattr(_C, "kernel_image_format", lambda device: image_format)
    with pytest.raises(NotImplementedError) as raised:
        device_code.check_runs_generated_code("dsc")
    assert f"its driver {reason}" in str(raised.value)
    assert 'backend="aot_eager"' in str(raised.value)


def test_strict_memory_faults_a_host_read_of_device_memory() -> None:
    """The control: the checks above would fault had any path read device memory."""
    script = textwrap.dedent(
        """
        import ctypes, torch
        from torchplug import Backend
        Backend(name="dsc", driver_options="hidden_capabilities=1").autoload()
        x = torch.ones(4, device="dsc")
        print(ctypes.string_at(x.data_ptr(), 4), flush=True)
        """
    )
    completed = _run(["-c", script], ENVIRONMENT)
    assert completed.returncode != 0
    assert "host code read or wrote simulated device memory" in completed.stderr


@pytest.mark.parametrize("driver", ["remote", "hidden"])
def test_collectives_and_ddp_on_two_ranks(driver: str, tmp_path: Path) -> None:
    # Gloo works on host copies made in stream order; under strict memory
    # (the hidden driver) a host read of device memory would fault the rank.
    ranks = run_ranks(["collectives", "ddp"], "dsc", tmp_path, DISCRETE_DRIVER=driver, **DISCRETE)
    assert_ok(ranks, "collectives")
    assert_ok(ranks, "ddp")
