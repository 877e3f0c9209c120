"""``torchplug bench``: the output's shape, not its timings (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def python(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter with ``args``; with ``check``, it must succeed."""
    result = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=600, check=False
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def torchplug(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return python("-m", "torchplug.cli", *args, check=check)


def test_bench_reports_pinned_and_unpinned_figures_side_by_side() -> None:
    report = json.loads(torchplug("bench", "--only", "tiny,copy", "--rounds", "1", "--json").stdout)
    assert report["device"] == "foo"
    assert report["conditions"]["pinned"]["pinned_core"] is not None
    assert report["conditions"]["unpinned"]["pinned_core"] is None
    assert [figure["name"] for figure in report["figures"]] == [
        "tiny elementwise op (a + b, 4 elements)",
        "2000x2000 matmul: the launch's return",
        "host to device copy, 64 MiB pinned",
        "device to host copy, 64 MiB pinned",
    ]
    for figure in report["figures"]:
        assert figure["target"]
        for pinning in ("pinned", "unpinned"):
            assert figure[pinning]["error"] is None
            assert figure[pinning]["ratio"] > 0


def test_bench_measures_the_device_it_is_given() -> None:
    report = json.loads(
        torchplug(
            "bench", "--only", "tiny", "--rounds", "1", "--no-pin", "--device", "hpu", "--json"
        ).stdout
    )
    assert report["device"] == "hpu"
    assert set(report["conditions"]) == {"unpinned"}
    for figure in report["figures"]:
        assert figure["unpinned"]["ratio"] > 0


def test_allreduce_benchmark_reports_bus_bandwidth() -> None:
    report = json.loads(
        torchplug(
            "bench", "--only", "allreduce", "--rounds", "1", "--no-pin", "--device", "foo", "--json"
        ).stdout
    )
    (figure,) = report["figures"]
    assert figure["name"].startswith("all_reduce 64 MiB float32, 2 ranks")
    assert figure["unit"] == "GB/s"
    assert figure["baseline"] == "cpu, gloo"
    assert figure["target"] == ">= 0.90x"
    assert figure["unpinned"]["value"] > 0
    assert figure["unpinned"]["baseline_value"] > 0


def test_discrete_benchmark_measures_a_device_the_host_cannot_address() -> None:
    """Its own process declares a device on the remote driver beside the active backends."""
    report = json.loads(
        torchplug("bench", "--only", "discrete", "--rounds", "1", "--no-pin", "--json").stdout
    )
    figures = {figure["name"]: figure for figure in report["figures"]}
    assert list(figures) == [
        "discrete device: tiny op (a + b, 4 elements)",
        "discrete device: MLP training step (as above)",
        "discrete device: host to device, 64 MiB pinned",
        "discrete device: device to host, 64 MiB pinned",
    ]
    for figure in figures.values():
        assert figure["unpinned"]["error"] is None
        assert figure["unpinned"]["ratio"] > 0


def test_bench_rejects_unknown_benchmark() -> None:
    result = torchplug("bench", "--only", "warp", check=False)
    assert result.returncode != 0
    assert "Unknown benchmark warp" in result.stderr


@pytest.mark.parametrize("partial", [["--only", "tiny"], ["--no-pin"], ["--pin"]])
def test_write_docs_needs_every_row_pinned_and_unpinned(partial: list[str], tmp_path) -> None:
    page = tmp_path / "performance.md"
    result = torchplug("bench", "--write-docs", str(page), *partial, check=False)
    assert result.returncode != 0
    assert "--write-docs measures every benchmark" in result.stderr


def test_bench_without_this_package_says_what_to_install() -> None:
    hide_package = (
        "import sys; sys.modules['torchplug_bench'] = None; "
        "from torchplug.cli import main; raise SystemExit(main(['bench', '--only', 'tiny']))"
    )
    result = python("-c", hide_package, check=False)
    assert result.returncode != 0
    assert "pip install torchplug-bench" in result.stderr
