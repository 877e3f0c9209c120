"""The 'torchplug' collective backend, with real processes on localhost.

The scenarios (in distributed_scenarios.py) run in one subprocess per rank,
rendezvousing through FileStores in a temporary directory. Scenarios that
leave the processes healthy share one launch per device (starting Python and
torch is the slow part); each launch is bounded by a timeout, and the process
groups use 20 s timeouts, so a broken collective fails the test instead of
hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

SCENARIOS = Path(__file__).with_name("distributed_scenarios.py")
RUN_TIMEOUT = 180

# Autograd on hpu fails on CUDA builds of torch (see plugins/vhabana_frameworks/tests/test_hpu.py).
CUDA_BUILD_HPU_AUTOGRAD = pytest.mark.xfail(
    torch.backends.cuda.is_built(),
    reason="torch CUDA builds cannot run autograd on HPU",
    strict=True,
)


@dataclass
class Rank:
    returncode: int
    output: str

    def section(self, scenario: str) -> str:
        """The lines scenario `scenario` printed, with its END status line."""
        begin = self.output.find(f"BEGIN {scenario}\n")
        assert begin >= 0, f"scenario {scenario} did not start:\n{self.output}"
        end = self.output.find(f"END {scenario} ", begin)
        if end < 0:
            return self.output[begin:]
        return self.output[begin : self.output.index("\n", end) + 1]

    def ok(self, scenario: str) -> bool:
        return self.section(scenario).rstrip().endswith(f"END {scenario} OK")

    def errors(self, scenario: str) -> list[str]:
        return [line for line in self.section(scenario).splitlines() if line.startswith("ERROR: ")]


def run_ranks(
    scenarios: list[str],
    device: str,
    scratch: Path,
    world: int = 2,
    local_rank: bool = False,
    **env: str,
) -> list[Rank]:
    processes = []
    for rank in range(world):
        rank_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        rank_env.pop("LOCAL_RANK", None)
        if local_rank:
            rank_env["LOCAL_RANK"] = str(rank)
        command = [sys.executable, str(SCENARIOS), ",".join(scenarios), device, str(rank)]
        processes.append(
            subprocess.Popen(
                [*command, str(world), str(scratch / "store")],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=rank_env,
            )
        )
    ranks = []
    try:
        for process in processes:
            output, _ = process.communicate(timeout=RUN_TIMEOUT)
            ranks.append(Rank(process.returncode, output))
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
        pytest.fail(f"scenarios {scenarios} on {device} did not finish within {RUN_TIMEOUT} s")
    return ranks


def assert_ok(ranks: list[Rank], scenario: str) -> None:
    for rank, result in enumerate(ranks):
        assert result.ok(scenario), f"rank {rank} failed:\n{result.section(scenario)}"


# Run under torchrun's LOCAL_RANK: rank r drives device r.
HEALTHY = {
    "foo": [
        "collectives",
        "stream_order",
        "default_backend",
        "local_rank_device",
        "ddp",
        "fsdp2",
    ],
    "hpu": ["collectives", "stream_order", "local_rank_device", "ddp"],
}


@pytest.fixture(scope="module")
def healthy_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Rank]]:
    return {
        device: run_ranks(
            scenarios, device, tmp_path_factory.mktemp(f"dist-{device}"), local_rank=True
        )
        for device, scenarios in HEALTHY.items()
    }


@pytest.mark.parametrize("device", ["foo", "hpu"])
def test_collectives_equal_cpu_results(device: str, healthy_runs: dict[str, list[Rank]]) -> None:
    assert_ok(healthy_runs[device], "collectives")


@pytest.mark.parametrize("device", ["foo", "hpu"])
def test_collectives_wait_for_the_current_stream(
    device: str, healthy_runs: dict[str, list[Rank]]
) -> None:
    assert_ok(healthy_runs[device], "stream_order")


def test_default_backend_serves_the_accelerator_only(
    healthy_runs: dict[str, list[Rank]],
) -> None:
    ranks = healthy_runs["foo"]
    assert_ok(ranks, "default_backend")
    for rank in ranks:
        assert rank.errors("default_backend") == [
            "ERROR: No backend type associated with device type cpu"
        ]


@pytest.mark.parametrize("device", ["foo", "hpu"])
def test_local_rank_selects_the_device(device: str, healthy_runs: dict[str, list[Rank]]) -> None:
    ranks = healthy_runs[device]
    assert_ok(ranks, "local_rank_device")
    for index, rank in enumerate(ranks):
        (error,) = rank.errors("local_rank_device")
        assert f"got a tensor on {device}:{1 - index}" in error
        assert f"drives {device}:{index}" in error
        assert f"torch.{device}.set_device(LOCAL_RANK)" in error


def test_ddp_equals_single_process_training(healthy_runs: dict[str, list[Rank]]) -> None:
    assert_ok(healthy_runs["foo"], "ddp")


@CUDA_BUILD_HPU_AUTOGRAD
def test_ddp_on_hpu(healthy_runs: dict[str, list[Rank]]) -> None:
    assert_ok(healthy_runs["hpu"], "ddp")


def test_fsdp2_equals_single_process_training(healthy_runs: dict[str, list[Rank]]) -> None:
    assert_ok(healthy_runs["foo"], "fsdp2")


def test_mismatched_sizes_abort_with_gloo_diagnosis(tmp_path: Path) -> None:
    ranks = run_ranks(["mismatched_sizes"], "foo", tmp_path)
    assert not any(
        rank.ok("mismatched_sizes") and not rank.errors("mismatched_sizes") for rank in ranks
    )
    combined = "\n".join(rank.output for rank in ranks)
    assert "Received data size doesn't match expected size" in combined


def test_mismatched_sizes_are_named_in_debug_mode(tmp_path: Path) -> None:
    ranks = run_ranks(["mismatched_sizes"], "foo", tmp_path, TORCH_DISTRIBUTED_DEBUG="DETAIL")
    assert_ok(ranks, "mismatched_sizes")
    for rank in ranks:
        (error,) = rank.errors("mismatched_sizes")
        assert "Detected mismatch between collectives on ranks" in error
        assert "TensorShape=[4]" in error
        assert "TensorShape=[5]" in error


def test_a_dead_rank_is_reported(tmp_path: Path) -> None:
    survivor, dead = run_ranks(["dead_rank"], "foo", tmp_path)
    assert dead.returncode == 3
    assert survivor.ok("dead_rank"), survivor.output
    (error,) = survivor.errors("dead_rank")
    assert "Connection" in error or "timed out" in error.lower()


def test_registration_is_cheap_and_lazy() -> None:
    probe = (
        "import sys, torch, torch.distributed as dist\n"
        "print(dist.Backend.default_device_backend_map.get('foo'),"
        " dist.Backend.default_device_backend_map.get('hpu'),"
        " sorted(dist.Backend.backend_capability['torchplug']),"
        " 'torchplug._distributed' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split() == ["torchplug", "torchplug", "['foo',", "'hpu']", "False"]
