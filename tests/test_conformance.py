"""Every backend in the workspace passes the conformance suite: no failure its file does not list."""

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# Each backend's sampled run; targets from the conformance brief.
MIN_OPINFO_FORWARD_PASS_RATE = 0.95


def installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


DEVICES = [
    "foo",
    "hpu",
    pytest.param(
        "npu",
        marks=pytest.mark.skipif(
            not installed("torch_vnpu"), reason="torch_vnpu (device npu) is not installed"
        ),
    ),
]


@pytest.mark.parametrize("device", DEVICES)
def test_backend_conforms(device: str, tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPLUG_")}
    markdown = tmp_path / f"{device}.md"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchplug.cli",
            "check",
            device,
            "--json",
            "--markdown",
            str(markdown),
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["device"] == device
    assert report["expectations"], "the backend ships no conformance.toml"
    assert report["unexpected_failures"] == [], json.dumps(report["unexpected_failures"], indent=1)
    assert result.returncode == 0
    forward = report["opinfo"]["forward"]
    assert forward["pass_rate"] >= MIN_OPINFO_FORWARD_PASS_RATE, forward
    assert f"# Conformance of `{device}`" in markdown.read_text()
