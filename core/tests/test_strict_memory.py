"""Strict mode: host code touching device memory outside a kernel fails loudly."""

import os
import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent(
    """
    import ctypes
    import torch
    x = torch.arange(4.0, device="foo")
    print("kernels", (x + 1).cpu().tolist(), x.sum().item(), flush=True)
    print("host read", ctypes.string_at(x.data_ptr(), 4), flush=True)  # the user's bug
    """
)


def run(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCENARIO],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )


def test_host_read_of_device_memory_is_caught() -> None:
    result = run(TORCHPLUG_STRICT_MEMORY="1")
    assert "kernels [1.0, 2.0, 3.0, 4.0] 6.0" in result.stdout  # kernels and copies still work
    assert "host read" not in result.stdout
    assert result.returncode != 0
    assert "strict mode: host code read or wrote simulated device memory" in result.stderr


def test_without_strict_mode_the_bug_goes_unnoticed() -> None:
    result = run()
    assert result.returncode == 0, result.stderr
    assert "host read" in result.stdout
