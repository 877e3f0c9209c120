"""Reductions over all and single dimensions, with keepdim and dtype arguments."""

import pytest
import torch

from torchplug_testing.compare import check_against_cpu

torch.manual_seed(1)
DATA = torch.randn(4, 7, 5)

REDUCTIONS = {
    "sum": lambda x: (x.sum(), x.sum(1), x.sum((0, 2), keepdim=True)),
    "sum_dtype": lambda x: x.sum(dtype=torch.float64),
    "mean": lambda x: (x.mean(), x.mean(-1, keepdim=True)),
    "prod": lambda x: x.prod(1),
    "max_min": lambda x: (x.max(), x.min(), x.max(dim=1), x.min(dim=2, keepdim=True)),
    "argmax_argmin": lambda x: (x.argmax(), x.argmin(1)),
    "amax_aminmax": lambda x: (x.amax((0, 1)), torch.aminmax(x, dim=2)),
    "var_std": lambda x: (x.var(1), x.std(2, correction=0), torch.var_mean(x, 0)),
    "norm": lambda x: (x.norm(), torch.linalg.vector_norm(x, 1, dim=1), x.norm(dim=2, p=3)),
    "logsumexp": lambda x: x.logsumexp(1),
    "cumulative": lambda x: (x.cumsum(0), x.cumprod(2), torch.cummax(x, 1)),
    "all_any": lambda x: ((x > -3).all(), (x > 2).any(1), (x > 0).all(2)),
    "count_nonzero": lambda x: torch.count_nonzero(x > 0, dim=1),
    "median_mode": lambda x: (x.median(1), torch.round(x).mode(2)),
    "nan_reductions": lambda x: (
        torch.where(x > 1, float("nan"), x).nansum(1),
        torch.where(x > 1, float("nan"), x).nanmean(),
    ),
    "empty": lambda x: (x[:, :0].sum(1), x[:0].amax(0) if x[:0].numel() else x[:0].sum()),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(device: str, name: str) -> None:
    check_against_cpu(REDUCTIONS[name], (DATA,), device)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.bool])
def test_reduction_dtypes(device: str, dtype: torch.dtype) -> None:
    values = (DATA * 10).to(dtype)
    check_against_cpu(lambda x: (x.sum(0), x.max(), x.cumsum(1)), (values,), device)
