"""torch.profiler sees kernels and copies on the simulated device."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


def _device_events(trace: Path) -> list[dict]:
    events = json.loads(trace.read_text())["traceEvents"]
    return [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]


def test_chrome_trace_holds_device_kernels_and_copies(device: str, tmp_path: Path) -> None:
    a = torch.randn(64, 64, device=device)
    host = torch.randn(256).pin_memory()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        b = torch.mm(a, a)
        c = torch.softmax(b, dim=1)  # through the fallback
        back = c.cpu()
        staged = host.to(device, non_blocking=True)  # async copy on the stream
        torch.foo.synchronize()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    device_events = _device_events(trace)
    kernels = {e["name"] for e in device_events if e["cat"] == "kernel"}
    copies = [e["name"] for e in device_events if e["cat"] == "gpu_memcpy"]
    assert {"aten::mm kernel", "aten::_softmax kernel"} <= kernels
    assert "Memcpy DtoH" in copies
    assert "Memcpy HtoD" in copies
    for event in device_events:
        assert event["dur"] >= 0
        assert event["args"]["device"].startswith(f"{device}:")
    # Kernels are linked to the CPU ops that launched them.
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat") == "ac2g" for e in events)
    assert torch.equal(back, c.cpu())
    assert staged.device.type == device


def test_device_time_is_attributed_to_operators(device: str) -> None:
    a = torch.randn(128, 128, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(3):
            a = torch.mm(a, a).clamp_(-1, 1)
    averages = {event.key: event for event in prof.key_averages()}
    assert averages["aten::mm"].device_time_total > 0
    assert averages["aten::mm"].count >= 3
    assert "FOO" in prof.key_averages().table(sort_by="device_time_total", row_limit=5)


def test_nothing_is_recorded_outside_a_session(device: str, tmp_path: Path) -> None:
    a = torch.randn(16, 16, device=device)
    torch.mm(a, a)  # not profiled
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.sigmoid(a)
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    assert {e["name"] for e in _device_events(trace)} == {"aten::sigmoid kernel"}


def test_cpu_only_profiling_has_no_device_events(device: str, tmp_path: Path) -> None:
    a = torch.randn(16, 16, device=device)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.mm(a, a)
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    assert _device_events(trace) == []


def test_legacy_profiler_times_operators_with_device_events(device: str) -> None:
    a = torch.randn(64, 64, device=device)
    with torch.autograd.profiler.profile(use_device=device, use_kineto=False) as prof:
        torch.mm(a, a)
    mm = next(event for event in prof.key_averages() if event.key == "aten::mm")
    assert mm.device_time_total > 0
