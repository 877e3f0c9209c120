"""The 'torchplug' collective backend on foo, with real processes on localhost."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from datetime import timedelta

import pytest

from distributed_launch import Rank, assert_local_rank_binding, assert_ok, run_ranks

# Scenarios that leave the processes healthy share one launch (starting Python
# and torch is the slow part), under torchrun's LOCAL_RANK: rank r drives device r.
SCENARIOS = ["collectives", "stream_order", "default_backend", "local_rank_device", "ddp", "fsdp2"]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Rank]:
    return run_ranks(SCENARIOS, "foo", tmp_path_factory.mktemp("dist-foo"), local_rank=True)


# What each checks is its docstring in distributed_scenarios.py.
@pytest.mark.parametrize("scenario", ["collectives", "stream_order", "ddp", "fsdp2"])
def test_scenario_passes_on_every_rank(ranks: list[Rank], scenario: str) -> None:
    assert_ok(ranks, scenario)


def test_default_backend_serves_the_accelerator_only(ranks: list[Rank]) -> None:
    assert_ok(ranks, "default_backend")
    for rank in ranks:
        assert rank.errors("default_backend") == [
            "ERROR: No backend type associated with device type cpu"
        ]


def test_local_rank_selects_the_device(ranks: list[Rank]) -> None:
    assert_local_rank_binding(ranks, "foo")


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


# The last reference to a finished collective is often dropped by a Gloo worker
# thread, and needs the GIL when the work saved Python objects with its
# thread-local state (DDP's hooks run inside backward, which stashes some). The
# script holds the GIL while the worker finishes (a 30 s switch interval), then
# destroys the group: the backend must let go of the GIL while Gloo joins its
# workers, or both wait forever.
DESTROY_WHILE_A_WORKER_NEEDS_THE_GIL = """
import sys, time, torch, torch.distributed as dist
sys.setswitchinterval(30)
torch._C._stash_obj_in_tls("torchplug-test", object())
dist.init_process_group("foo:torchplug", init_method=sys.argv[1], rank=0, world_size=1)
tensor = torch.ones(1 << 20, device="foo")
for _ in range(16):
    dist.all_reduce(tensor, async_op=True)
torch._C._stash_obj_in_tls("torchplug-test", object())
deadline = time.monotonic() + 0.5
while time.monotonic() < deadline:
    pass
dist.destroy_process_group()
print("destroyed")
"""


def test_destroy_process_group_while_a_worker_needs_the_gil(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", DESTROY_WHILE_A_WORKER_NEEDS_THE_GIL, f"file://{tmp_path}/store"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["destroyed"]


def test_local_rank_beyond_the_simulated_devices_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from torchplug import distributed

    count = torch.foo.device_count()
    monkeypatch.setenv("LOCAL_RANK", str(count))
    assert torch.foo.current_device() == 0
    with pytest.raises(RuntimeError, match=f"TORCHPLUG_DEVICE_COUNT={count + 1}"):
        distributed._bind_local_rank()
    assert torch.foo.current_device() == 0


def test_strict_device_memory_is_refused() -> None:
    from torchplug import _C, distributed

    _C.set_strict_mode(True)
    try:
        with pytest.raises(RuntimeError, match="Unset TORCHPLUG_STRICT_MEMORY"):
            distributed._create(None, 0, 1, timedelta(seconds=5))
    finally:
        _C.set_strict_mode(False)


@pytest.mark.skipif(
    importlib.util.find_spec("torch_vnpu") is None, reason="torch_vnpu is not installed"
)
def test_npu_collectives_and_ddp(tmp_path) -> None:
    # npu owns PrivateUse1 only where chosen; the ranks choose it, this process keeps foo.
    ranks = run_ranks(
        ["collectives", "local_rank_device", "ddp"],
        "npu",
        tmp_path,
        local_rank=True,
        TORCHPLUG_PRIVATEUSE1="npu",
    )
    assert_ok(ranks, "collectives")
    assert_local_rank_binding(ranks, "npu")
    assert_ok(ranks, "ddp")
