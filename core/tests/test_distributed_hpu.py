"""The 'torchplug' collective backend on hpu (the in-tree HPU key), with real processes."""

from __future__ import annotations

import pytest

from device_matrix import CUDA_BUILD_HPU_AUTOGRAD
from distributed_launch import (
    Rank,
    assert_local_rank_binding,
    assert_ok,
    run_ranks,
)

# One launch for all scenarios, under torchrun's LOCAL_RANK; DDP last, as it
# is expected to fail on CUDA builds of torch.
SCENARIOS = ["collectives", "stream_order", "local_rank_device", "ddp"]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Rank]:
    return run_ranks(SCENARIOS, "hpu", tmp_path_factory.mktemp("dist-hpu"), local_rank=True)


# What each checks is its docstring in distributed_scenarios.py.
@pytest.mark.parametrize(
    "scenario",
    ["collectives", "stream_order", pytest.param("ddp", marks=CUDA_BUILD_HPU_AUTOGRAD)],
)
def test_scenario_passes_on_every_rank(ranks: list[Rank], scenario: str) -> None:
    assert_ok(ranks, scenario)


def test_local_rank_selects_the_device(ranks: list[Rank]) -> None:
    assert_local_rank_binding(ranks, "hpu")
