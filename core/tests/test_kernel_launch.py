"""Every kernel entry goes through the one kernel launch (csrc/aten/kernel_launch.h)."""

import re
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

CORE = Path(__file__).resolve().parents[1]
SOURCES = [
    *sorted((CORE / "csrc" / "aten").glob("*.cpp")),
    *sorted((CORE / "csrc" / "bindings").glob("*.cpp")),
    *sorted((CORE.parent / "plugins").glob("*/csrc/*.cpp")),
]
# What a kernel launch does, which no kernel may do by itself.
LAUNCH_STEPS = re.compile(
    r"\b(runtime::KernelAccess|DeviceActivity|wait_for_current_stream|check_synchronizing_operation)\b"
)
# Where those steps are defined, and the two places work runs outside a kernel
# entry: a queued asynchronous copy, executed later by the stream's worker,
# and the access-only entry of kernel API version 1, kept for plugins built
# against it.
DEFINED_IN = {"kernel_launch.cpp", "backend_registry.cpp", "device_activity.cpp", "sync_debug.cpp"}
ALLOWED = {
    "copy_kernels.cpp": ["runtime::KernelAccess access{dst_ptr, src_ptr};"],
    "kernel_api.cpp": [
        "*scope = new runtime::KernelAccess(std::vector<const void*>(pointers, pointers + count));",
        "delete static_cast<runtime::KernelAccess*>(scope);",
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
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as trace:
        torch.mm(a, a)  # native kernel
        torch.relu(a)  # host kernel
        torch.erfinv(a.clamp(-0.5, 0.5))  # CPU fallback
        a.sum().item()  # item()
        a.cpu()  # copy
        torch.foo.synchronize()
    names = {
        event.name for event in trace.events() if event.device_type != torch.autograd.DeviceType.CPU
    }
    for expected in (
        "aten::mm kernel",
        "aten::relu kernel",
        "aten::erfinv kernel",
        "item()",
        "Memcpy DtoH",
    ):
        assert expected in names, sorted(names)
