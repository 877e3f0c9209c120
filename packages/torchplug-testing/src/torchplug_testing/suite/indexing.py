"""Indexing, masking, scatter and gather match the CPU."""

import pytest
import torch

from torchplug_testing.compare import check_against_cpu

torch.manual_seed(0)
DATA = torch.randn(5, 6)
INDEX = torch.tensor([[0, 4, 1], [3, 3, 2]])
MASK = DATA > 0.2

READS = {
    "basic": lambda x: x[1:4, -2],
    "ellipsis_none": lambda x: x[..., None, 2],
    "advanced": lambda x: x[torch.tensor([4, 0, 4]).to(x.device)],
    "advanced_pair": lambda x: x[
        torch.tensor([1, 2]).to(x.device), torch.tensor([5, 0]).to(x.device)
    ],
    "boolean_mask": lambda x: x[(x > 0.2)],
    "index_select": lambda x: x.index_select(1, torch.tensor([5, 1, 1]).to(x.device)),
    "gather": lambda x: x.gather(0, INDEX.to(x.device)),
    "take": lambda x: x.take(torch.tensor([0, 29, 7]).to(x.device)),
    "masked_select": lambda x: x.masked_select(MASK.to(x.device)),
    "nonzero": lambda x: (x > 0.2).nonzero(),
    "where": lambda x: torch.where(x > 0, x, -x),
    "topk": lambda x: x.topk(2, dim=1),
    "sort": lambda x: x.sort(dim=0, stable=True),
    "unique": lambda x: (x > 0).to(torch.int64).unique(return_counts=True),
}


@pytest.mark.parametrize("name", READS)
def test_reads(device: str, name: str) -> None:
    check_against_cpu(READS[name], (DATA,), device)


def write_setitem(x):
    x = x.clone()
    x[1:3, ::2] = 7.0
    x[torch.tensor([0, 4]).to(x.device)] = torch.arange(6.0).to(x.device)
    return x


WRITES = {
    "setitem": write_setitem,
    "masked_fill": lambda x: x.masked_fill(MASK.to(x.device), -1.0),
    "index_put_accumulate": lambda x: x.clone().index_put_(
        (torch.tensor([0, 0, 2]).to(x.device),),
        torch.ones(3, 6).to(x.device),
        accumulate=True,
    ),
    "index_add": lambda x: x.index_add(0, torch.tensor([1, 1, 3]).to(x.device), x[:3]),
    "index_copy": lambda x: x.index_copy(1, torch.tensor([2, 0]).to(x.device), x[:, :2] * 3),
    "scatter": lambda x: torch.zeros(5, 6).to(x.device).scatter(0, INDEX.to(x.device), x),
    "scatter_add": lambda x: torch.zeros(5, 6).to(x.device).scatter_add(0, INDEX.to(x.device), x),
    "scatter_reduce_amax": lambda x: x.scatter_reduce(
        0, INDEX.to(x.device), x[:2, :3] * 10, reduce="amax"
    ),
    "put_accumulate": lambda x: x.clone().put_(
        torch.tensor([0, 0, 29]).to(x.device), torch.ones(3).to(x.device), accumulate=True
    ),
}


@pytest.mark.parametrize("name", WRITES)
def test_writes(device: str, name: str) -> None:
    check_against_cpu(WRITES[name], (DATA,), device)
