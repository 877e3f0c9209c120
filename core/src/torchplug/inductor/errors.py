"""What torch.compile on a torchplug device reports: compile failures that say which
device, which operator and what to do, and the warning that the integration
could not be verified against the installed torch."""

from __future__ import annotations

from collections.abc import Iterable

import torch


class DeviceCompileError(RuntimeError):
    """Inductor could not compile a graph for a torchplug device."""


class InductorIntegrationWarning(UserWarning):
    """torchplug's Inductor integration does not match the installed torch, so
    graphs on torchplug devices run with the devices' eager kernels."""


def graph_device_types(gm: torch.fx.GraphModule, inputs: Iterable[object] = ()) -> set[str]:
    """The device types of a graph's inputs and of the values its nodes produce
    (``val`` after AOTAutograd, ``example_value`` in Dynamo's graph)."""
    found = {item.device.type for item in inputs if isinstance(item, torch.Tensor)}
    for node in gm.graph.nodes:
        value = node.meta.get("val", node.meta.get("example_value"))
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, torch.Tensor):
                found.add(item.device.type)
    return found


def explain(device: str, error: BaseException) -> str:
    # Inductor's lowering errors name the operator on a "target:" line.
    targets = [
        line.strip()[len("target:") :].strip()
        for line in str(error).splitlines()
        if line.strip().startswith("target:")
    ]
    operator = f" while compiling {targets[0]}" if targets else ""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return (
        f"torch.compile's Inductor backend failed on the '{device}' device{operator}: "
        f"{type(error).__name__}: {first_line}. To run this code now, compile with "
        f"torch.compile(..., backend='aot_eager') (Dynamo and AOTAutograd with the device's eager "
        f"kernels), and report the failure with the original error below."
    )
