"""Launches distributed_scenarios.py as one subprocess per rank, bounded in time.

The ranks rendezvous through FileStores in a scratch directory (no ports to
pick); the process groups use 20 s timeouts, and the launch as a whole is
killed after RUN_TIMEOUT, so a broken collective fails a test instead of
hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SCENARIOS = Path(__file__).with_name("distributed_scenarios.py")
# Generous: on 2 cores the launch shares the machine with the conformance runs,
# and six scenarios (DDP and FSDP2 among them) ran past 180 s in a clean CI run.
RUN_TIMEOUT = 600


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


def assert_local_rank_binding(ranks: list[Rank], device: str) -> None:
    assert_ok(ranks, "local_rank_device")
    for index, rank in enumerate(ranks):
        (error,) = rank.errors("local_rank_device")
        assert f"got a tensor on {device}:{1 - index}" in error
        assert f"drives {device}:{index}" in error
        assert f"torch.{device}.set_device(LOCAL_RANK)" in error
