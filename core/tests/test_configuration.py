"""Device count and memory from the environment and the API, in fresh interpreters."""

import os
import subprocess
import sys
import textwrap

import pytest

from torchplug.settings import parse_bytes


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512MiB", 512 << 20),
        ("8GiB", 8 << 30),
        ("8G", 8 << 30),
        ("1048576", 1 << 20),
        ("1.5k", 1536),
    ],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


def test_parse_bytes_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="512MiB"):
        parse_bytes("lots")


def test_environment_sets_count_and_memory() -> None:
    result = run(
        """
        import torch
        print(torch.foo.device_count(), torch.foo.get_device_properties(3).total_memory)
        """,
        TORCHPLUG_FOO_DEVICE_COUNT="4",
        TORCHPLUG_DEVICE_MEMORY="64MiB",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["4", str(64 << 20)]


def test_small_memory_gives_out_of_memory_then_recovers() -> None:
    result = run(
        """
        import torch
        keep = torch.empty(40 << 20, dtype=torch.uint8, device="foo")
        try:
            torch.empty(40 << 20, dtype=torch.uint8, device="foo")
        except torch.OutOfMemoryError as error:
            print("oom", "64.00 MiB" in str(error))
        del keep
        print(torch.empty(40 << 20, dtype=torch.uint8, device="foo").numel())
        """,
        TORCHPLUG_DEVICE_MEMORY="64MiB",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["oom", "True", str(40 << 20)]


def test_api_configures_before_first_use_only() -> None:
    result = run(
        """
        import torch
        from torchplug.runtime import configure_devices
        configure_devices("foo", device_count=3, memory="1GiB")
        print(torch.foo.device_count(), torch.foo.get_device_properties(0).total_memory)
        torch.ones(1, device="foo")
        try:
            configure_devices("foo", device_count=5)
        except RuntimeError as error:
            print("refused:", "already in use" in str(error))
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="1",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"3 {1 << 30}", "refused: True"]
