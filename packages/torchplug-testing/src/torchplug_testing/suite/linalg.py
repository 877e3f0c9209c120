"""Linear algebra: products, solvers and decompositions match the CPU."""

import pytest
import torch

from torchplug_testing.compare import check_against_cpu

torch.manual_seed(2)
A = torch.randn(4, 4) + 4 * torch.eye(4)
B = torch.randn(4, 3)
BATCH = torch.randn(3, 4, 5)
SPD = A @ A.T + torch.eye(4)

OPERATIONS = {
    "mm": lambda: (torch.mm, (A, B)),
    "matmul_broadcast": lambda: (torch.matmul, (BATCH, torch.randn(5, 2))),
    "bmm": lambda: (torch.bmm, (BATCH, BATCH.transpose(1, 2))),
    "addmm": lambda: (lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2), (B[0], A, B)),
    "baddbmm": lambda: (torch.baddbmm, (torch.randn(3, 4, 4), BATCH, BATCH.transpose(1, 2))),
    "mv_dot_outer": lambda: (
        lambda x, v: (torch.mv(x, v), torch.dot(v, v), torch.outer(v, v)),
        (A, B[:, 0]),
    ),
    "einsum": lambda: (lambda x, y: torch.einsum("bij,bkj->bik", x, y), (BATCH, BATCH)),
    "transposed_operands": lambda: (lambda x, y: x.t() @ y, (A, B)),
    "solve": lambda: (torch.linalg.solve, (A, B)),
    "inv_det": lambda: (lambda x: (torch.linalg.inv(x), torch.linalg.det(x)), (A,)),
    "cholesky": lambda: (torch.linalg.cholesky, (SPD,)),
    "qr": lambda: (torch.linalg.qr, (B,)),
    "svdvals": lambda: (torch.linalg.svdvals, (BATCH,)),
    "eigvalsh": lambda: (torch.linalg.eigvalsh, (SPD,)),
    "lstsq": lambda: (lambda x, y: torch.linalg.lstsq(x, y).solution, (A, B)),
    "matrix_norms": lambda: (
        lambda x: (torch.linalg.matrix_norm(x), torch.linalg.matrix_norm(x, ord=1)),
        (A,),
    ),
}


@pytest.mark.parametrize("name", OPERATIONS)
def test_linalg(device: str, name: str) -> None:
    function, inputs = OPERATIONS[name]()
    check_against_cpu(function, inputs, device, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_matmul_dtypes(device: str, dtype: torch.dtype) -> None:
    check_against_cpu(torch.matmul, ((A * 3).to(dtype), (B * 3).to(dtype)), device)
