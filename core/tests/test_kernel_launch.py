"""Every kernel entry goes through the one kernel launch (csrc/launch/kernel_launch.h)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

CORE = Path(__file__).resolve().parents[1]
# The torch integration's folders (the collective backend, distributed/,
# included: it enters the device through the kernel SDK's KernelScope); the
# device runtimes below it and the core's driver layer have no kernels.
NOT_KERNEL_ENTRIES = {"runtime", "drivers", "driver"}
SOURCES = [
    *sorted(
        path
        for path in (CORE / "csrc").glob("*/*.cpp")
        if path.parent.name not in NOT_KERNEL_ENTRIES
    ),
    *sorted((CORE.parent / "plugins").glob("*/csrc/*.cpp")),
]
# What a kernel launch does, which no kernel may do by itself.
LAUNCH_STEPS = re.compile(
    r"\b(driver::MemoryAccess|DeviceActivity|wait_for_current_stream|check_synchronizing_operation)\b"
)
# Where those steps are defined, and the places work runs outside a kernel
# entry: a queued asynchronous copy of adopted memory, executed later by the
# stream's worker; the allocator's and the host alias' synchronous byte copies
# (the runtime's memcpy before the driver layer); and the access-only entry of
# kernel API version 1, kept for plugins built against it.
DEFINED_IN = {"kernel_launch.cpp", "backend_registry.cpp", "device_activity.cpp", "sync_debug.cpp"}
ALLOWED = {
    "copy_kernels.cpp": ["const driver::MemoryAccess access{dst_ptr, src_ptr};"],
    "device_allocator.cpp": ["const driver::MemoryAccess access{dest, src};"],
    "host_alias.cpp": ["const driver::MemoryAccess access{data.get()};"],
    "kernel_api.cpp": [
        "*scope = new driver::MemoryAccess(std::vector<const void*>(pointers, pointers + count));",
        "delete static_cast<driver::MemoryAccess*>(scope);",
    ],
}


def test_sources_were_found() -> None:
    assert len(SOURCES) > 15


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_no_kernel_entry_bypasses_the_launch(source: Path) -> None:
    if source.name in DEFINED_IN:
        return
    uses = [
        (number, line.strip())
        for number, line in enumerate(source.read_text().splitlines(), 1)
        if LAUNCH_STEPS.search(line) and not line.lstrip().startswith("//")
    ]
    lines = [line for _, line in uses]
    assert lines == ALLOWED.get(source.name, []), (
        f"{source.name} does a kernel launch's work itself ({uses}); use KernelLaunch"
    )


def test_every_kind_of_entry_is_a_device_activity(device: str) -> None:
    a = torch.randn(16, 16, device=device)
    big = torch.randn(256, 256, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as trace:
        torch.mm(a, a)  # native kernel, run at launch
        big + big  # native kernel, queued on the stream
        torch.nn.functional.gelu(a)  # host kernel
        torch.erfinv(a.clamp(-0.5, 0.5))  # CPU fallback
        a.sum().item()  # item()
        a.cpu()  # copy
        torch.foo.synchronize()
    names = {
        event.name for event in trace.events() if event.device_type != torch.autograd.DeviceType.CPU
    }
    for expected in (
        "aten::mm kernel",
        "aten::add kernel",
        "aten::gelu kernel",
        "aten::erfinv (CPU fallback)",
        "item()",
        "Memcpy DtoH",
    ):
        assert expected in names, sorted(names)


# Every kind of kernel entry, run with device memory page-protected: an entry
# that reaches device memory outside a kernel launch aborts the process.
STRICT_SCENARIO = """
import torch
import torch.nn.functional as F

d = "foo"
# Factories, random numbers, views and in-place writes through them.
x = torch.arange(24.0, device=d).view(4, 6)
x.t()[1:3].mul_(2)
x.unfold(1, 2, 2).diagonal().add_(1)
r = torch.randn(4, 6, device=d, generator=torch.Generator(d).manual_seed(0))
y = torch.empty(0, device=d).resize_(4, 6).copy_(r).as_strided((3, 3), (1, 3))
e = torch.eye(3, device=d).expand(2, 3, 3).contiguous()
# Native and host kernels, the CPU fallback, copies between devices, item().
z = torch.addmm(y, y, y.t()) + torch.mm(y, y).relu() - e[0] * 2 / 3
z = z.sum(0) + torch.erfinv(z.clamp(-0.5, 0.5)).cumsum(1).topk(2).values.sum()
z = z.to(f"{d}:1").to(f"{d}:0").cpu().pin_memory().to(d, non_blocking=True)
torch.foo.synchronize()
s = torch.zeros(8, device=d)
s.untyped_storage().resize_(64)
total = z.sum().item() + s[:2].tolist()[0]
# Autograd, complex operands (the conjugate views of mm's backward), attention.
w = torch.randn(3, 4, dtype=torch.complex64, device=d, requires_grad=True)
F.linear(w, torch.randn(2, 4, dtype=torch.complex64, device=d)).abs().sum().backward()
q = torch.randn(1, 2, 5, 8, device=d, requires_grad=True)
F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
image = torch.randn(1, 2, 6, 6, device=d, requires_grad=True)
F.log_softmax(F.conv2d(image, torch.randn(3, 2, 3, 3, device=d)).mean((2, 3)), 1).sum().backward()
# Sparse tensors.
sparse = x.to_sparse()
dense = torch.sparse.mm(sparse, x.t()) + x.to_sparse_csr().to_dense().sum()
# The in-tree HPU key, and device memory shared with other processes.
h = (torch.ones(3, device="hpu") + 1).cpu()
shared = torch.ones(4, device=d).share_memory_()
print("done", total, w.grad.abs().sum().item(), q.grad.sum().item(), dense.sum().item(), h.sum().item(),
      shared.sum().item(), flush=True)
"""

NPU_SCENARIO = """
import torch
import torch_vnpu

x = torch.randn(4, 8, device="npu", requires_grad=True)
weight = torch.randn(8, device="npu", requires_grad=True)
(torch_vnpu.fast_gelu(x) + torch_vnpu.rms_norm(x, weight)).sum().backward()
print("done", x.grad.sum().item(), weight.grad.sum().item(), flush=True)
"""


def run_strict(scenario: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", scenario],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCHPLUG_STRICT_MEMORY": "1", "TORCHPLUG_STRICT": "1", **env},
        check=False,
    )


def test_strict_mode_sees_no_kernel_entry_reach_device_memory_outside_a_launch() -> None:
    result = run_strict(STRICT_SCENARIO)
    assert "strict mode" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("done"), result.stdout


def test_strict_mode_vendor_kernels_enter_through_the_launch() -> None:
    pytest.importorskip("torch_vnpu")
    result = run_strict(NPU_SCENARIO, TORCHPLUG_PRIVATEUSE1="npu")
    assert "strict mode" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("done"), result.stdout
