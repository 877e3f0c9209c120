"""Inductor's code generation for a torchplug device: C++ scheduling, and the
Python wrapper that launches every generated kernel through the device's
launch path and allocates from its caching allocator.

Every generated C++ kernel is compiled into an image with the driver's
kernel entry point (:mod:`torchplug.inductor.device_code`). Where device
memory is host-addressable (the simulated devices), the core launches the
image's entry point like an eager kernel (``torchplug._C.launch_host_code``):
queued on the current stream, or run at once inside a kernel launch (stream
order, strict memory access, profiler activity). Where it is not, the device
loads the image and runs it on its stream (``torchplug._C.launch_device_code``).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch

from torchplug import _C
from torchplug.inductor import device_code

# The wrapper's fast paths into the device (torchplug/_C: bindings/compiled_kernels.cpp).
_LAUNCH_IMPORT = (
    "from torchplug._C import empty_strided_device as torchplug_empty, "
    "launch_host_code as torchplug_launch_host, launch_device_code as torchplug_launch_device"
)
# Binds a kernel's name to its image, loaded for the device.
_DEVICE_CODE_IMPORT = (
    "from torchplug.inductor.device_code import device_kernel as torchplug_device_kernel"
)


class UnsupportedCppWrapper:
    """Inductor's C++ wrapper (``cpp_wrapper=True``, AOTInductor) would call the
    generated kernels directly, outside the device's kernel launch path; until
    it launches them through it, it is refused by name."""

    supports_caching = False

    @staticmethod
    def create(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "Inductor's C++ wrapper (torch._inductor.config.cpp_wrapper, AOTInductor) is not "
            "supported on torchplug devices: it would launch the generated kernels outside the "
            "device's launch path. Compile with the default Python wrapper (cpp_wrapper=False)"
        )


@functools.cache
def scheduling() -> type:
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.virtualized import V

    class DeviceCppScheduling(CppScheduling):
        """Inductor's C++ scheduling. A kernel of a torchplug device becomes a
        device image, not a binding the host calls: its source is marked with the
        device type, so that Inductor, which defines each distinct source once per
        graph, never hands it a CPU kernel of the same text (or the other way
        round)."""

        def define_kernel(self, src_code: str, nodes: Any, kernel_args: Any = None) -> str:
            device = V.graph.current_device
            if device is not None and device.type != "cpu":
                src_code = f"{device_code.SOURCE_MARK}{device.type}\n{src_code}"
            return super().define_kernel(src_code, nodes, kernel_args)

    return DeviceCppScheduling


@functools.cache
def wrapper_codegen(devices: Callable[[], tuple[str, ...]]) -> type:
    from torch._inductor.codegen.wrapper import (
        PythonWrapperCodegen,
        SubgraphPythonWrapperCodegen,
    )

    class LaunchesDeviceKernels:
        """Calls C++ kernels on a torchplug device through the device's launch path."""

        def _generate_kernel_call_helper(
            self,
            kernel_name: str,
            call_args: list[Any],
            *,
            device: Any = None,
            triton: bool = True,
            **kwargs: Any,
        ) -> None:
            from torch._inductor.virtualized import V

            device = device or V.graph.get_current_device_or_throw()
            if triton or device.type not in devices():
                super()._generate_kernel_call_helper(  # type: ignore[misc]
                    kernel_name, call_args, device=device, triton=triton, **kwargs
                )
                return
            arguments = "".join(f", {argument}" for argument in call_args)
            launch = (
                "torchplug_launch_host"
                if _C.host_addressable(device.type)
                else "torchplug_launch_device"
            )
            self.writeline(  # type: ignore[attr-defined]
                f"{launch}({kernel_name!r}, {kernel_name}.function, "
                f"{_device_arguments(device)}{arguments})"
            )

        def define_kernel(
            self,
            kernel_name: str,
            kernel_body: str,
            metadata: str | None = None,
            gpu: bool = True,
            cpp_definition: str | None = None,
        ) -> None:
            """A C++ kernel of a torchplug device is compiled into an image with
            the driver's kernel entry point, not into a Python binding the host
            calls (a binding needs the interpreter to run, so it cannot be queued)."""
            from torch._inductor.virtualized import V

            device = V.graph.current_device
            if (
                not gpu
                and device is not None
                and device.type in devices()
                and kernel_body.startswith(device_code.PYBINDING_DEFINITION)
            ):
                if not _C.host_addressable(device.type):
                    device_code.check_runs_generated_code(device.type)
                kernel_body = (
                    f"torchplug_device_kernel(async_compile, {device.type!r}, "
                    + kernel_body.removeprefix(device_code.PYBINDING_DEFINITION)
                )
            super().define_kernel(  # type: ignore[misc]
                kernel_name, kernel_body, metadata, gpu, cpp_definition
            )

    class SubgraphWrapperCodegen(LaunchesDeviceKernels, SubgraphPythonWrapperCodegen):
        pass

    class WrapperCodegen(LaunchesDeviceKernels, PythonWrapperCodegen):
        @staticmethod
        def create(
            is_subgraph: bool,
            subgraph_name: str | None,
            parent_wrapper: PythonWrapperCodegen | None,
            partition_signatures: Any = None,
        ) -> PythonWrapperCodegen:
            if is_subgraph:
                return SubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            if torch._inductor.config.triton.cudagraphs:
                _say_graphs_are_not_replayed()
            return WrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.imports.writeline(_LAUNCH_IMPORT)
            self.imports.writeline(_DEVICE_CODE_IMPORT)

        def make_allocation(
            self,
            name: str,
            device: torch.device,
            dtype: torch.dtype,
            shape: Any,
            stride: Any,
            allocation_shape: Any = None,
            is_pinned: bool = False,
        ) -> str:
            if (
                device.type not in devices()
                or torch._inductor.config.test_configs.track_memory_lifecycle
            ):
                return super().make_allocation(
                    name, device, dtype, shape, stride, allocation_shape, is_pinned
                )
            # On the graph's device index: a graph compiled for device 1 allocates there.
            shape_tuple = self.codegen_python_shape_tuple(shape)
            allocation_tuple = self.codegen_python_shape_tuple(
                shape if allocation_shape is None else allocation_shape
            )
            stride_tuple = self.codegen_python_shape_tuple(stride)
            line = (
                f"{name} = torchplug_empty({allocation_tuple}, {stride_tuple}, {dtype}, "
                f"{_device_arguments(device)})"
            )
            if allocation_tuple != shape_tuple:
                line += f".as_strided({shape_tuple}, {stride_tuple})"
            return line

    return WrapperCodegen


@functools.cache
def _say_graphs_are_not_replayed() -> None:
    """Once per process: ``mode="reduce-overhead"`` (Inductor's
    ``triton.cudagraphs``) compiles for a torchplug device without graph
    replay. Inductor's graph trees capture only on CUDA (its supported device
    types are a private constant, and the trees call ``torch.cuda`` directly)
    and skip other devices without a word."""
    from torch._inductor.virtualized import V

    names = sorted(t for t in V.graph.device_types if t != "cpu") or ["this device"]
    device = names[0]
    warnings.warn(
        f'torch.compile(mode="reduce-overhead") on {device} runs the compiled code without '
        f"graph replay: torch {torch.__version__.split('+')[0]}'s Inductor captures graphs on CUDA "
        f"only. To replay, capture the compiled function yourself with torch.{device}.graph "
        "(see torchplug's docs/compile.md).",
        UserWarning,
        stacklevel=2,
    )


def _device_arguments(device: torch.device) -> str:
    """The (device type, index) pair the fast paths take, as c10's enum value
    (stable for a torch version, which Inductor's cache key includes)."""
    return f"{_C.device_type_id(device.type)}, {device.index if device.index is not None else 0}"
