"""Which thread runs a backward pass on a torchplug device.

The thread that ran ``import torch`` runs its device backward passes itself,
as the CPU's; other threads, and a user who turns autograd's multithreading
back on, get autograd's device worker threads. Each case is a fresh
interpreter: the setting belongs to the thread that activated the backends.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

BACKWARD_THREADS = """
import threading
import torch

def backward_thread() -> int:
    x = torch.linspace(-1, 1, 6, device="foo", requires_grad=True)
    seen = []
    x.register_hook(lambda grad: seen.append(threading.get_ident()))
    (x.exp() * x).sum().backward()
    expected = (lambda c: (c.exp() * (c + 1)))(torch.linspace(-1, 1, 6))
    torch.testing.assert_close(x.grad.cpu(), expected)
    return seen[0]

caller = threading.get_ident()
assert backward_thread() == caller, "backward on the importing thread left it"

other = {}
def in_other_thread() -> None:
    other["caller"] = threading.get_ident()
    other["ran_on"] = backward_thread()
worker = threading.Thread(target=in_other_thread)
worker.start()
worker.join()
assert other["ran_on"] != other["caller"], "another thread should keep autograd's device threads"

torch.autograd.set_multithreading_enabled(True)
assert backward_thread() != caller, "set_multithreading_enabled(True) should restore device threads"
print("ok")
"""

# A reentrant checkpoint runs a nested backward inside the outer one, on the
# same thread; its recomputed dropout must replay the device's RNG state.
REENTRANT_CHECKPOINT = """
import torch
from torch.utils.checkpoint import checkpoint

def grads(checkpointed: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Tanh()).to("foo")
    x = torch.randn(4, 8, device="foo", requires_grad=True)
    torch.manual_seed(1)
    out = checkpoint(layer, x, use_reentrant=True) if checkpointed else layer(x)
    (out * out).sum().backward()
    return [p.grad.cpu() for p in layer.parameters()] + [x.grad.cpu()]

for got, expected in zip(grads(True), grads(False)):
    torch.testing.assert_close(got, expected)
print("ok")
"""


@pytest.mark.parametrize(
    "script", [BACKWARD_THREADS, REENTRANT_CHECKPOINT], ids=["threads", "reentrant"]
)
def test_backward_thread(script: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip() == "ok"
