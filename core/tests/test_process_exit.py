"""A script that trains on a device and exits at once ends cleanly."""

from __future__ import annotations

import subprocess
import sys

TRAIN_AND_EXIT = """
import torch
x = torch.linspace(-2, 2, 12, device="foo").requires_grad_()
(x.exp() * x).sum().backward()
print(x.grad.sum().item())
"""

# Unfixed, about one run in two aborted at exit; eight in a row all pass
# by chance less than once in 200.
RUNS = 8


def _run_concurrently(script: str) -> list[tuple[int, str, str]]:
    """Return code, stdout and stderr of RUNS children running `script` at once."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(RUNS)
    ]
    outcomes = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=180)
        outcomes.append((process.returncode, stdout, stderr))
    return outcomes


def test_exit_right_after_backward_does_not_abort() -> None:
    for returncode, stdout, stderr in _run_concurrently(TRAIN_AND_EXIT):
        assert "terminate called" not in stderr
        assert returncode == 0, stderr[-2000:]
        assert float(stdout) > 0


QUEUE_AND_EXIT = """
import torch
a = torch.randn(2048, 2048, device="foo")
torch.foo._sleep(100)
for _ in range(5):
    b = a @ a
with torch.foo.stream(torch.foo.Stream()):
    torch.foo._sleep(50)
    c = a * 2
x = torch.randn(1000, device="foo")
for _ in range(50):
    y = x * torch.tensor(2.0)
print("queued")
"""


def test_exit_with_kernels_still_queued_is_clean() -> None:
    """The kernels finish before the statics they use are destroyed (unfixed,
    about one run in three corrupted the heap at exit)."""
    for returncode, stdout, stderr in _run_concurrently(QUEUE_AND_EXIT):
        assert "malloc" not in stderr, stderr[-2000:]
        assert "terminate called" not in stderr
        assert returncode == 0, stderr[-2000:]
        assert stdout.strip() == "queued"
