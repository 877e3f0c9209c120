"""Compile failures on a torchplug device say which device, which operator and what to do."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch


class DeviceCompileError(RuntimeError):
    """Inductor could not compile a graph for a torchplug device."""


def install(compile_fx: types.ModuleType, devices: Callable[[], tuple[str, ...]]) -> None:
    """Wrap Inductor's code generation so that its failures on our devices explain themselves."""
    generate = compile_fx.fx_codegen_and_compile

    @functools.wraps(generate)
    def fx_codegen_and_compile(gm: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
        try:
            return generate(gm, *args, **kwargs)
        except Exception as error:
            ours = sorted(_graph_device_types(gm) & set(devices()))
            if not ours:
                raise
            raise DeviceCompileError(_explain(ours[0], error)) from error

    compile_fx.fx_codegen_and_compile = fx_codegen_and_compile


def _graph_device_types(gm: torch.fx.GraphModule) -> set[str]:
    found = set()
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, torch.Tensor):
                found.add(item.device.type)
    return found


def _explain(device: str, error: Exception) -> str:
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
