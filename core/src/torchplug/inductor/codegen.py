"""Inductor's code generation for torchplug devices.

The simulated devices' memory is host-addressable, so the kernels are
Inductor's C++ (CPP) kernels. What makes them device kernels is the wrapper:
every generated kernel is called through ``torchplug._C.launch_compiled``,
which runs it as one device kernel launch (device guard, stream order, strict
memory access, sync-debug, profiler activity), exactly like an eager kernel.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

# The wrapper's fast paths into the device (torchplug/_C: bindings/compiled_kernels.cpp).
_LAUNCH_IMPORT = (
    "from torchplug._C import empty_strided_device as torchplug_empty, "
    "launch_compiled as torchplug_launch"
)


def install(common: types.ModuleType, devices: Callable[[], tuple[str, ...]]) -> None:
    """Register every enabled device whenever Inductor initializes its backends."""
    global _enabled_devices
    _enabled_devices = devices
    builtin_registration = common.init_backend_registration

    def init_backend_registration() -> None:
        builtin_registration()
        for name in devices():
            if common.get_scheduling_for_device(name) is None:
                register(name)

    common.init_backend_registration = init_backend_registration
    if "torch._inductor.graph" in sys.modules:
        # Inductor was fully imported before this backend activated: its
        # modules hold the unwrapped function, so register now.
        for name in devices():
            register(name)


def register(name: str) -> None:
    from torch._inductor.codegen.common import (
        register_backend_for_device,
        register_device_op_overrides,
    )
    from torch._inductor.codegen.cpp import CppScheduling

    _run_cpu_class_heuristics()
    register_backend_for_device(name, CppScheduling, _wrapper_codegen(), UnsupportedCppWrapper)
    register_device_op_overrides(name, _device_op_overrides(name))


@functools.cache
def _run_cpu_class_heuristics() -> None:
    """Inductor asks whether a node is on the CPU, or which backend the current
    device uses, to pick its fusion, realization and dtype-propagation rules,
    assuming any other device runs Triton-style SIMD kernels. A torchplug
    device runs C++ kernels, so it must get the CPU's answers (the SIMD-only
    rules fail on C++ kernels)."""
    from torch._inductor import ir, scheduler, utils
    from torch._inductor.codegen import common
    from torch._inductor.virtualized import V

    builtin_is_cpu = ir.is_cpu
    builtin_backend = utils.get_current_backend

    def is_cpu(node: Any) -> bool:
        return builtin_is_cpu(node) or ir.get_device_type(node) in _registered_devices()

    def node_is_cpu(self: Any) -> bool:
        device = self.get_device()
        return device is not None and (device.type == "cpu" or device.type in _registered_devices())

    def get_current_backend(device_type: str | None = None) -> str:
        device_type = device_type or V.graph.get_current_device_or_throw().type
        return "cpp" if device_type in _registered_devices() else builtin_backend(device_type)

    ir.is_cpu = is_cpu
    scheduler.BaseSchedulerNode.is_cpu = node_is_cpu
    common.get_current_backend = get_current_backend
    utils.get_current_backend = get_current_backend
    _lower_numerics_like_the_cpu()


def _lower_numerics_like_the_cpu() -> None:
    """Two lowerings choose their arithmetic by asking ``device.type == "cpu"``
    directly: the variance of batch and layer norms (a two-pass sum on the CPU
    for reductions up to ``config.cpp.use_two_step_variance_threshold``
    elements, Welford elsewhere) and division by a constant (multiplication by
    its reciprocal everywhere but the CPU). A torchplug device runs the CPU's
    C++ kernels, so it takes the CPU's choice and compiled code gives compiled
    CPU code's numbers, to the bit."""
    import sympy
    from torch._inductor import config, ir, lowering
    from torch._inductor.utils import sympy_product

    builtin_two_step = lowering.use_two_step_variance
    builtin_constant = lowering.get_constant_value

    def use_two_step_variance(x: Any, axis: Any, keepdim: bool, input_dtype: Any) -> bool:
        if ir.get_device_type(x) not in _registered_devices():
            return builtin_two_step(x, axis, keepdim, input_dtype)
        reduction = lowering._make_reduction_inner(
            x,
            axis=lowering._validate_reduction_axis(x, axis),
            keepdims=keepdim,
            dtype=None,
            override_return_dtype=None,
        )
        elements = sympy_product(reduction["reduction_ranges"])
        return (
            isinstance(elements, sympy.Integer)
            and int(elements) <= config.cpp.use_two_step_variance_threshold
            and sympy_product(reduction["ranges"]) != 1
        )

    def get_constant_value(x: Any) -> Any:
        # Only division asks, to replace x / c by x * (1 / c): not on the CPU.
        if ir.get_device_type(x) in _registered_devices():
            return None
        return builtin_constant(x)

    lowering.use_two_step_variance = use_two_step_variance
    lowering.get_constant_value = get_constant_value


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


def _wrapper_codegen() -> type:
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
            if triton or device.type not in _registered_devices():
                super()._generate_kernel_call_helper(  # type: ignore[misc]
                    kernel_name, call_args, device=device, triton=triton, **kwargs
                )
                return
            arguments = "".join(f", {argument}" for argument in call_args)
            self.writeline(  # type: ignore[attr-defined]
                f"torchplug_launch({kernel_name!r}, {kernel_name}, {_device_arguments(device)}"
                f"{arguments})"
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
            return WrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.imports.writeline(_LAUNCH_IMPORT)

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
                device.type not in _registered_devices()
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


def _device_arguments(device: torch.device) -> str:
    """The (device type, index) pair the fast paths take, as c10's enum value
    (stable for a torch version, which Inductor's cache key includes)."""
    from torchplug import _C

    return f"{_C.device_type_id(device.type)}, {device.index if device.index is not None else 0}"


def _registered_devices() -> tuple[str, ...]:
    return _enabled_devices()


# The activated devices, as torchplug.inductor records them (set by install).
_enabled_devices: Callable[[], tuple[str, ...]] = tuple


def _device_op_overrides(name: str) -> Any:
    from torch._inductor.codegen.common import DeviceOpOverrides

    aten_type = "at::kHPU" if name == "hpu" else "at::kPrivateUse1"

    class TorchplugDeviceOpOverrides(DeviceOpOverrides):
        def import_get_raw_stream_as(self, alias: str) -> str:
            return f"from torchplug.inductor.runtime import raw_stream_getter; {alias} = raw_stream_getter({name!r})"

        def set_device(self, device_idx: Any) -> str:
            return f"torch.{name}.set_device({device_idx})"

        def synchronize(self) -> str:
            return f"torch.{name}.synchronize()"

        def device_guard(self, device_idx: Any) -> str:
            return f"torch.{name}.device({device_idx})"

        def aten_device_type(self) -> str:
            return aten_type

    return TorchplugDeviceOpOverrides()
