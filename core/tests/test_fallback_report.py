"""The fallback report: every operator the CPU fallback runs is counted per device
type (calls, bytes, time), logged once with TORCHPLUG_WARN_FALLBACK=1, and named
apart from the device's own kernels in profiler traces."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from device_matrix import active_devices, rerun_as_owner
from torchplug.device_module import FallbackOperator
from torchplug_testing.child import child_environment, run_python

DEVICES = active_devices()
# Devices with native kernels (hpu runs nearly every operator through the fallback).
NATIVE_DEVICES = [name for name in DEVICES if name != "hpu"]
FLOAT_BYTES = 4


def _report(device: str) -> dict[str, FallbackOperator]:
    return {row.operator: row for row in getattr(torch, device).fallback_report()}


@pytest.mark.parametrize("device", DEVICES)
def test_a_fallback_operator_is_counted_with_its_bytes(device: str) -> None:
    x = torch.rand(8, device=device) - 0.5
    out = torch.empty(8, device=device)
    module = getattr(torch, device)
    module.reset_fallback_report()
    for _ in range(3):
        torch.erfinv(x)  # reads x, returns a new tensor: 2 x 32 bytes
    torch.erfinv(x, out=out)  # the result is `out`, counted once as an argument
    x.erfinv_()
    report = _report(device)
    assert report["aten::erfinv"].calls == 3
    assert report["aten::erfinv"].bytes == 3 * 2 * 8 * FLOAT_BYTES
    assert report["aten::erfinv"].seconds > 0
    assert (report["aten::erfinv.out"].calls, report["aten::erfinv.out"].bytes) == (1, 64)
    assert (report["aten::erfinv_"].calls, report["aten::erfinv_"].bytes) == (1, 32)
    rows = module.fallback_report()
    assert [row.seconds for row in rows] == sorted((row.seconds for row in rows), reverse=True)


@pytest.mark.parametrize("device", NATIVE_DEVICES)
def test_operators_with_a_native_kernel_are_not_in_the_report(device: str) -> None:
    a = torch.ones(4, 4, device=device)
    getattr(torch, device).reset_fallback_report()
    torch.mm(a, a)
    a + a
    torch.erfinv(a * 0.5)
    report = _report(device)
    assert "aten::erfinv" in report
    assert not {"aten::mm", "aten::add.Tensor", "aten::mul.Tensor"} & set(report), report


@pytest.mark.parametrize("device", DEVICES)
def test_reset_starts_afresh_and_rows_are_frozen(device: str) -> None:
    module = getattr(torch, device)
    torch.erfinv(torch.zeros(2, device=device))
    module.reset_fallback_report()
    assert module.fallback_report() == []
    torch.erfinv(torch.zeros(2, device=device))
    (row,) = [row for row in module.fallback_report() if row.operator == "aten::erfinv"]
    with pytest.raises(AttributeError):
        row.calls = 0  # type: ignore[misc]


@pytest.mark.parametrize("device", DEVICES)
def test_threads_count_every_call(device: str) -> None:
    x = torch.zeros(4, device=device)
    getattr(torch, device).reset_fallback_report()

    def run() -> None:
        for _ in range(50):
            torch.erfinv(x)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _report(device)["aten::erfinv"].calls == 200


def test_each_device_type_has_its_own_report() -> None:
    if "hpu" not in DEVICES:
        pytest.skip("needs hpu active beside foo")
    torch.foo.reset_fallback_report()
    torch.hpu.reset_fallback_report()
    torch.erfinv(torch.zeros(2, device="hpu"))
    assert "aten::erfinv" in _report("hpu")
    assert "aten::erfinv" not in _report("foo")


@pytest.mark.parametrize("device", NATIVE_DEVICES)
def test_profiler_names_fallback_kernels_apart(device: str, tmp_path: Path) -> None:
    a = torch.ones(4, 4, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.mm(a, a)
        torch.erfinv(a * 0.5)
        getattr(torch, device).synchronize()
    keys = {event.key for event in prof.key_averages()}
    assert {"aten::erfinv (CPU fallback)", "aten::mm kernel"} <= keys, sorted(keys)
    assert "aten::mm (CPU fallback)" not in keys
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    kernels = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    fallbacks = {e["name"] for e in kernels if e["args"].get("cpu_fallback")}
    assert fallbacks == {"aten::erfinv (CPU fallback)"}


WARNING_SCENARIO = """
import logging
import torch

logging.basicConfig(format="%(levelname)s %(name)s %(message)s")
for device in ("foo:0", "foo:1", "foo:0"):
    torch.erfinv(torch.zeros(2, device=device))
torch.ones(2, device="foo") + 1
if hasattr(torch, "hpu") and torch.hpu.is_available():
    torch.erfinv(torch.zeros(2, device="hpu"))
"""


def test_warning_logs_each_fallback_operator_once_per_device_type() -> None:
    finished = run_python(WARNING_SCENARIO, child_environment(TORCHPLUG_WARN_FALLBACK="1"))
    assert finished.returncode == 0, finished.stderr
    lines = [line for line in finished.stderr.splitlines() if "CPU fallback" in line]
    erfinv = [line for line in lines if line.startswith("WARNING torchplug.fallback aten::erfinv ")]
    assert len([line for line in erfinv if " on foo:0:" in line]) == 1, lines
    assert not [line for line in erfinv if " on foo:1:" in line], lines
    assert 'torch.library.impl("aten::erfinv", "PrivateUse1")' in erfinv[0]
    assert "docs/vendor-guide.md#3-the-c-half" in erfinv[0]
    assert not [line for line in lines if "aten::add" in line or "aten::fill_" in line], lines
    if "hpu" in DEVICES:
        assert len([line for line in erfinv if " on hpu:0:" in line]) == 1, lines


def test_no_warning_without_the_variable() -> None:
    environment = child_environment(drop=("TORCHPLUG_WARN_FALLBACK",))
    finished = run_python(WARNING_SCENARIO, environment)
    assert finished.returncode == 0, finished.stderr
    assert "CPU fallback" not in finished.stderr


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
