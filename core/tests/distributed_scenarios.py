"""Multi-process scenarios for test_distributed.py: one process per rank.

Usage: python distributed_scenarios.py SCENARIO[,SCENARIO...] DEVICE RANK WORLD_SIZE STORE_FILE

The scenarios run one after the other in the same processes (starting Python
and torch is the slow part), each with a process group of its own. Each
checks its results itself (against what the CPU computes). The output has a
section per scenario: ``BEGIN <name>``, expected errors as ``ERROR: <message>``,
then ``END <name> OK`` or ``END <name> FAILED`` after the traceback.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as functional

TIMEOUT = timedelta(seconds=20)
# A scenario still running after this long is stuck outside the process
# group's timeout: print every thread's stack and exit, so the test shows where.
STUCK_AFTER_SECONDS = 90

Scenario = Callable[[str, int, int], None]
SCENARIOS: dict[str, Scenario] = {}


def scenario(function: Scenario) -> Scenario:
    SCENARIOS[function.__name__] = function
    return function


def init(device: str, rank: int, world: int, backend: str | None = None) -> None:
    dist.init_process_group(
        backend,
        init_method=f"file://{os.environ['STORE_FILE']}.{os.environ['SCENARIO']}",
        rank=rank,
        world_size=world,
        timeout=TIMEOUT,
    )


def default_or_named(device: str) -> str | None:
    """No backend argument when `device` is the accelerator (torch picks the default)."""
    accelerator = torch.accelerator.current_accelerator()
    return None if accelerator is not None and accelerator.type == device else f"{device}:torchplug"


def expect_equal(name: str, actual: torch.Tensor, expected: torch.Tensor) -> None:
    """`actual`, a device tensor, holds what the CPU computed as `expected`."""
    assert actual.device.type != "cpu", f"{name}: result on {actual.device}"
    torch.testing.assert_close(actual.cpu(), expected, msg=lambda m: f"{name}: {m}")


@scenario
def collectives(device: str, rank: int, world: int) -> None:
    init(device, rank, world, f"cpu:gloo,{device}:torchplug")
    ranks = torch.arange(world, dtype=torch.float32)

    def per_rank(r: int) -> torch.Tensor:
        return torch.arange(4, dtype=torch.float32) + 10 * r

    expected = {
        dist.ReduceOp.SUM: sum(per_rank(r) for r in range(world)),
        dist.ReduceOp.PRODUCT: torch.stack([per_rank(r) for r in range(world)]).prod(0),
        dist.ReduceOp.MIN: per_rank(0),
        dist.ReduceOp.MAX: per_rank(world - 1),
        dist.ReduceOp.AVG: sum(per_rank(r) for r in range(world)) / world,
    }
    for op, value in expected.items():
        tensor = per_rank(rank).to(device)
        dist.all_reduce(tensor, op=op)
        expect_equal(f"all_reduce {op}", tensor, value)

    bits = [torch.tensor([0b0110, 0b1010]) + r for r in range(world)]
    for op, combine in [
        (dist.ReduceOp.BAND, torch.bitwise_and),
        (dist.ReduceOp.BOR, torch.bitwise_or),
        (dist.ReduceOp.BXOR, torch.bitwise_xor),
    ]:
        value = bits[0]
        for other in bits[1:]:
            value = combine(value, other)
        tensor = bits[rank].to(device)
        dist.all_reduce(tensor, op=op)
        expect_equal(f"all_reduce {op}", tensor, value)

    with pytest.raises(RuntimeError, match=r"ReduceOp\.AVG needs floating-point tensors"):
        dist.all_reduce(bits[rank].to(device), op=dist.ReduceOp.AVG)

    tensor = per_rank(rank).to(device)
    dist.broadcast(tensor, src=world - 1)
    expect_equal("broadcast", tensor, per_rank(world - 1))

    gathered = [torch.empty(4, device=device) for _ in range(world)]
    dist.all_gather(gathered, per_rank(rank).to(device))
    for r, tensor in enumerate(gathered):
        expect_equal(f"all_gather[{r}]", tensor, per_rank(r))

    flat = torch.empty(4 * world, device=device)
    dist.all_gather_into_tensor(flat, per_rank(rank).to(device))
    expect_equal("all_gather_into_tensor", flat, torch.cat([per_rank(r) for r in range(world)]))

    chunk = torch.empty(2, device=device)
    source = torch.arange(2.0 * world) * (rank + 1)
    dist.reduce_scatter_tensor(chunk, source.to(device))
    total = sum(torch.arange(2.0 * world) * (r + 1) for r in range(world))
    expect_equal("reduce_scatter_tensor", chunk, total[2 * rank : 2 * rank + 2])
    dist.reduce_scatter_tensor(chunk, source.to(device), op=dist.ReduceOp.AVG)
    expect_equal("reduce_scatter_tensor AVG", chunk, total[2 * rank : 2 * rank + 2] / world)

    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
        tensor = per_rank(rank).to(device)
        dist.reduce(tensor, dst=0, op=op)
        if rank == 0:
            expect_equal(f"reduce {op}", tensor, expected[op])

    gather_list = [torch.empty(4, device=device) for _ in range(world)] if rank == 0 else None
    dist.gather(per_rank(rank).to(device), gather_list, dst=0)
    if gather_list is not None:
        for r, tensor in enumerate(gather_list):
            expect_equal(f"gather[{r}]", tensor, per_rank(r))

    received = torch.empty(4, device=device)
    scatter_list = [per_rank(r).to(device) for r in range(world)] if rank == 0 else None
    dist.scatter(received, scatter_list, src=0)
    expect_equal("scatter", received, per_rank(rank))

    sent = torch.arange(float(world)) + 100 * rank
    exchanged = torch.empty(world, device=device)
    dist.all_to_all_single(exchanged, sent.to(device))
    expect_equal("all_to_all_single", exchanged, torch.arange(world) * 100.0 + rank)

    peer = (rank + 1) % world
    if rank % 2 == 0:
        dist.send(per_rank(rank).to(device), dst=peer)
    else:
        message = torch.empty(4, device=device)
        dist.recv(message, src=rank - 1)
        expect_equal("recv", message, per_rank(rank - 1))

    tensor = torch.ones(1 << 16, device=device) * (rank + 1)
    work = dist.all_reduce(tensor, async_op=True)
    work.wait()
    assert work.is_completed()
    expect_equal("async all_reduce", tensor[:3], torch.full((3,), float(ranks.sum() + world)))

    future = dist.all_reduce(torch.ones(2, device=device), async_op=True).get_future()
    (result,) = future.wait()
    assert result.device.type == device, f"future result on {result.device}"
    expect_equal("future", result, torch.full((2,), float(world)))

    reduced = functional.all_reduce(per_rank(rank).to(device), "sum", dist.group.WORLD)
    assert reduced.device.type == device
    expect_equal("functional all_reduce", reduced, expected[dist.ReduceOp.SUM])
    dist.barrier()


@scenario
def stream_order(device: str, rank: int, world: int) -> None:
    """A collective waits for work queued on the current stream before reading."""
    init(device, rank, world, f"cpu:gloo,{device}:torchplug")
    module = getattr(torch, device)
    side = module.Stream()
    with warnings.catch_warnings():
        # Pinned for `device` even when it is not the accelerator (hpu next to
        # foo): only memory pinned for it makes a non-blocking copy asynchronous.
        warnings.simplefilter("ignore", DeprecationWarning)
        source = torch.full((1 << 16,), float(rank + 1)).pin_memory(device)
    with module.stream(side):
        tensor = torch.zeros(1 << 16, device=device)
        # Long enough that a loaded machine cannot run it out before the query.
        module._sleep(1000)
        tensor.copy_(source, non_blocking=True)  # queued behind the sleep
        assert not side.query(), "the copy should still be pending"
        dist.all_reduce(tensor)
    expect_equal(
        "all_reduce after a queued copy",
        tensor,
        torch.full((1 << 16,), float(sum(range(1, world + 1)))),
    )


@scenario
def default_backend(device: str, rank: int, world: int) -> None:
    """init_process_group() without a backend picks torchplug for the accelerator."""
    init(device, rank, world)
    group = dist.group.WORLD
    backend = group._get_backend(torch.device(device))
    assert type(backend).__name__ == "DeviceCollectives", type(backend)
    tensor = torch.ones(3, device=device)
    dist.all_reduce(tensor)
    expect_equal("all_reduce", tensor, torch.full((3,), float(world)))
    try:
        dist.all_reduce(torch.ones(3))
    except Exception as error:
        print(f"ERROR: {error}", flush=True)


@scenario
def local_rank_device(device: str, rank: int, world: int) -> None:
    """Under torchrun's LOCAL_RANK, each rank drives its own device index."""
    init(device, rank, world, f"{device}:torchplug")
    module = getattr(torch, device)
    assert module.current_device() == rank, (module.current_device(), rank)
    tensor = torch.ones(2, device=device)
    assert tensor.device.index == rank
    dist.all_reduce(tensor)
    expect_equal("all_reduce", tensor, torch.full((2,), float(world)))
    try:
        dist.all_reduce(torch.ones(2, device=f"{device}:{1 - rank}"))
    except Exception as error:
        print(f"ERROR: {error}", flush=True)


@scenario
def mismatched_sizes(device: str, rank: int, world: int) -> None:
    init(device, rank, world, f"{device}:torchplug")
    disagreeing = [
        torch.ones(4 + rank, device=device),
        torch.ones(4, device=device, dtype=torch.float32 if rank == 0 else torch.float64),
    ]
    for tensor in disagreeing:
        try:
            dist.all_reduce(tensor)
        except Exception as error:
            print("ERROR: " + str(error).replace("\n", " | "), flush=True)
    agreeing = torch.ones(4, device=device)
    dist.all_reduce(agreeing)  # the group is still usable
    print(f"SUM: {agreeing.sum().item()}", flush=True)


@scenario
def dead_rank(device: str, rank: int, world: int) -> None:
    init(device, rank, world, f"{device}:torchplug")
    tensor = torch.ones(4, device=device)
    dist.all_reduce(tensor)
    if rank == world - 1:
        os._exit(3)
    try:
        dist.all_reduce(tensor)
        dist.all_reduce(tensor)
    except Exception as error:
        print(f"ERROR: {error}", flush=True)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


# (inputs, targets) of each training step.
Batches = list[tuple[torch.Tensor, torch.Tensor]]


def _batches(steps: int, batch: int) -> Batches:
    generator = torch.Generator().manual_seed(1)
    return [
        (torch.randn(batch, 6, generator=generator), torch.randn(batch, 2, generator=generator))
        for _ in range(steps)
    ]


def _train(model: torch.nn.Module, batches: list, device: str) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs.to(device)), targets.to(device))
        loss.backward()
        optimizer.step()


def _join_data_parallel(
    device: str, rank: int, world: int, steps: int
) -> tuple[str, Batches, Batches]:
    """Joins the group on this rank's device; returns that device, the combined
    batches (what the one-process reference trains on) and this rank's shards of them."""
    init(device, rank, world, default_or_named(device))
    getattr(torch, device).set_device(rank)
    batches = _batches(steps=steps, batch=4 * world)
    shards = [(x.chunk(world)[rank], y.chunk(world)[rank]) for x, y in batches]
    return f"{device}:{rank}", batches, shards


def _trained_on_cpu(batches: Batches) -> torch.nn.Module:
    """The one-process reference: the same model trained on the combined batches."""
    reference = _model()
    _train(reference, batches, "cpu")
    return reference


@scenario
def ddp(device: str, rank: int, world: int) -> None:
    """DDP on `world` ranks equals one process training on the combined batch."""
    local_device, batches, shards = _join_data_parallel(device, rank, world, steps=5)
    model = torch.nn.parallel.DistributedDataParallel(_model().to(local_device))
    _train(model, shards, local_device)
    # DDP times its iterations with the device's timer (events on the current stream).
    timing = model._get_ddp_logging_data()
    for stage in ("forward_compute", "backward_compute", "backward_comm"):
        assert timing.get(f"avg_{stage}_time", 0) > 0, f"no {stage} time in {timing}"

    reference = _trained_on_cpu(batches)
    for (name, trained), expected in zip(
        model.module.named_parameters(), reference.parameters(), strict=True
    ):
        assert trained.device == torch.device(local_device), trained.device
        torch.testing.assert_close(trained.detach().cpu(), expected.detach(), msg=name)


@scenario
def fsdp2(device: str, rank: int, world: int) -> None:
    """FSDP2 (fully_shard) training equals one process training on the combined batch."""
    from torch.distributed.fsdp import fully_shard

    local_device, batches, shards = _join_data_parallel(device, rank, world, steps=3)
    model = _model().to(local_device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    _train(model, shards, local_device)

    reference = _trained_on_cpu(batches)
    for (name, trained), expected in zip(
        model.named_parameters(), reference.parameters(), strict=True
    ):
        full = trained.full_tensor()
        assert full.device.type == device, full.device
        torch.testing.assert_close(full.detach().cpu(), expected.detach(), msg=name)


def activate_discrete_device(device: str, driver: str) -> None:
    """Declares `device` on a discrete driver ("remote", or "hidden": the
    simulator with host-addressable memory hidden), as discrete_checks.py does."""
    from torchplug import Backend, get_remote_driver

    if driver == "remote":
        backend = Backend(name=device, driver=get_remote_driver(), driver_options="devices=2")
    else:
        backend = Backend(name=device, driver_options="hidden_capabilities=1")
    status = backend.autoload()
    assert status.active, status.reason


def main() -> None:
    names, device, rank, world, store = sys.argv[1:]
    os.environ["STORE_FILE"] = store
    if "DISCRETE_DRIVER" in os.environ:
        activate_discrete_device(device, os.environ["DISCRETE_DRIVER"])
    for name in names.split(","):
        os.environ["SCENARIO"] = name
        print(f"BEGIN {name}", flush=True)
        faulthandler.dump_traceback_later(STUCK_AFTER_SECONDS, exit=True, file=sys.stdout)
        status = "OK"
        try:
            SCENARIOS[name](device, int(rank), int(world))
        except Exception:
            traceback.print_exc(file=sys.stdout)
            status = "FAILED"
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            faulthandler.cancel_dump_traceback_later()
        print(f"END {name} {status}", flush=True)


if __name__ == "__main__":
    main()
