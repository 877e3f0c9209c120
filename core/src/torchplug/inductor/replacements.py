"""Every torch internal that torchplug replaces, why, and the torch releases each
was verified against: the only place in torchplug that replaces torch's code.

Registration (:mod:`torchplug.inductor.registration`) uses Dynamo's and
Inductor's extension points. What they cannot reach is done here, by replacing
functions in torch's own modules: ``REPLACED`` lists them. ``RELIED_ON`` lists
what the registration calls or overrides with a fixed signature.

When the user's first compile imports ``torch._inductor.compile_fx``, each of
them is fingerprinted in the installed torch (:mod:`torchplug.inductor.symbols`)
and compared with the fingerprints recorded for the releases it was verified
against (:mod:`torchplug.inductor.verification`). A missing or changed symbol
gives one :class:`~torchplug.inductor.errors.InductorIntegrationWarning`
and a fallback instead of code generation: graphs on torchplug devices run
with the devices' eager kernels through AOTAutograd (what
``backend="aot_eager"`` does), which give the CPU's numbers. The fingerprints
cannot see new callers of a replaced function; the compile tests can.

To verify a new torch release, run ``core/tests/test_inductor_integration.py``
against it: a failure lists the fingerprints to record.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from torchplug.inductor.errors import DeviceCompileError, explain, graph_device_types
from torchplug.inductor.symbols import Check, Devices, Replace, TorchInternal

# --- the replacements -------------------------------------------------------


@dataclass
class IntegrationState:
    """What the verification found, read by the entry point's replacement."""

    activated: bool = False
    routes_to_eager_kernels: bool = False
    generates_code: bool = True
    explains_failures: bool = False
    problems: list[str] = field(default_factory=list)


state = IntegrationState()


def _route_compile(original: Callable[..., Any], devices: Devices) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def compile_fx(
        model_: torch.fx.GraphModule, example_inputs_: Any, *args: Any, **kwargs: Any
    ) -> Any:
        ours = graph_device_types(model_, example_inputs_) & set(devices())
        if not ours:
            return original(model_, example_inputs_, *args, **kwargs)
        if not state.generates_code:
            return torch._dynamo.lookup_backend("aot_eager")(model_, example_inputs_)
        if not state.explains_failures:
            return original(model_, example_inputs_, *args, **kwargs)
        bound = signature.bind(model_, example_inputs_, *args, **kwargs)
        inner_compile = bound.arguments.get(
            "inner_compile", signature.parameters["inner_compile"].default
        )
        bound.arguments["inner_compile"] = _explaining(inner_compile, devices)
        return original(*bound.args, **bound.kwargs)

    return compile_fx


def _explaining(inner_compile: Callable[..., Any], devices: Devices) -> Callable[..., Any]:
    from torch._inductor.exc import InductorError

    @functools.wraps(inner_compile)
    def explained(gm: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
        try:
            return inner_compile(gm, *args, **kwargs)
        except InductorError as error:
            cause = error.inner_exception
            ours = sorted(graph_device_types(gm) & set(devices()))
            if not ours:
                raise
            raise DeviceCompileError(explain(ours[0], cause)) from cause

    return explained


def _ir_is_cpu(original: Callable[..., bool], devices: Devices) -> Callable[..., bool]:
    from torch._inductor.ir import get_device_type

    def is_cpu(x: Any) -> bool:
        return original(x) or get_device_type(x) in devices()

    return is_cpu


def _node_is_cpu(original: Callable[..., bool], devices: Devices) -> Callable[..., bool]:
    def is_cpu(self: Any) -> bool:
        device = self.get_device()
        return original(self) or (device is not None and device.type in devices())

    return is_cpu


def _current_backend(original: Callable[..., str], devices: Devices) -> Callable[..., str]:
    def get_current_backend(device_type: str | None = None) -> str:
        from torch._inductor.virtualized import V

        device_type = device_type or V.graph.get_current_device_or_throw().type
        return "cpp" if device_type in devices() else original(device_type)

    return get_current_backend


def _two_step_variance(original: Callable[..., bool], devices: Devices) -> Callable[..., bool]:
    import sympy
    from torch._inductor import config, lowering
    from torch._inductor.ir import get_device_type
    from torch._inductor.utils import sympy_product

    def use_two_step_variance(x: Any, axis: Any, keepdim: bool, input_dtype: Any) -> bool:
        if get_device_type(x) not in devices():
            return original(x, axis, keepdim, input_dtype)
        # The CPU's branch of the original, which this replacement was verified against.
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

    return use_two_step_variance


def _no_constant_divisor(original: Callable[..., Any], devices: Devices) -> Callable[..., Any]:
    from torch._inductor.ir import get_device_type

    def get_constant_value(x: Any) -> Any:
        # Only div_prim asks, to replace x / c by x * (1 / c): never on the CPU.
        if get_device_type(x) in devices():
            return None
        return original(x)

    return get_constant_value


_V214, _V215 = "2.14.1", "2.15.0"


def _in_both_releases(fingerprint: str) -> dict[str, str]:
    """``verified`` for a symbol whose fingerprint did not change between the releases."""
    return {_V214: fingerprint, _V215: fingerprint}


def _replaced(
    module: str,
    name: str,
    why: str,
    source: str,
    replace: Replace,
    also_bound_in: tuple[str, ...] = (),
    depends_on: tuple[str, ...] = (),
) -> TorchInternal:
    """A function replaced here, checked by its source, which both releases share."""
    return TorchInternal(
        module,
        name,
        why,
        Check.SOURCE,
        _in_both_releases(source),
        replace,
        also_bound_in,
        depends_on,
    )


ENTRY = TorchInternal(
    "torch._inductor.compile_fx",
    "compile_fx",
    why="Inductor's entry point. Graphs on a torchplug device go to the device's eager kernels "
    "(AOTAutograd, as with backend='aot_eager') when this table does not match the installed "
    "torch; otherwise the inner_compile it hands AOTAutograd for the forward and backward "
    "graphs re-raises Inductor's failures as DeviceCompileError naming the device, the "
    "operator and that workaround.",
    check=Check.SIGNATURE,
    verified=_in_both_releases(
        "(model_, example_inputs_, inner_compile, config_patches, decompositions, "
        "ignore_shape_env, compile_region_name)"
    ),
    replace=_route_compile,
)

REPLACED: tuple[TorchInternal, ...] = (
    ENTRY,
    _replaced(
        "torch._inductor.ir",
        "is_cpu",
        "Lowering asks it to pick the CPU's realization thresholds and C++-kernel rules; any "
        "other device is assumed to run Triton-style kernels, whose rules fail on the C++ kernels "
        "a torchplug device runs. It answers True for torchplug devices.",
        "a460e4731719",
        _ir_is_cpu,
    ),
    _replaced(
        "torch._inductor.scheduler",
        "BaseSchedulerNode.is_cpu",
        "The scheduler asks it to pick the CPU's fusion rules, for the same reason as "
        "ir.is_cpu. It answers True for nodes on torchplug devices.",
        "1853bfcfad2e",
        _node_is_cpu,
    ),
    _replaced(
        "torch._inductor.utils",
        "get_current_backend",
        "Code generation asks it which kernel language the current device uses, and gets "
        "config.cuda_backend ('triton') for any device it does not know. It answers 'cpp' for "
        "torchplug devices. Also replaced where torch._inductor.codegen.common imported it.",
        "0d55eba1393a",
        _current_backend,
        also_bound_in=("torch._inductor.codegen.common",),
    ),
    _replaced(
        "torch._inductor.lowering",
        "use_two_step_variance",
        "Batch and layer norm variances are a two-pass sum on the CPU up to "
        "config.cpp.use_two_step_variance_threshold elements, Welford elsewhere: it tests "
        "device.type == 'cpu'. Torchplug devices take the CPU's branch, so compiled code gives "
        "compiled CPU code's numbers to the bit.",
        "5ad11ca9418e",
        _two_step_variance,
    ),
    _replaced(
        "torch._inductor.lowering",
        "get_constant_value",
        "div_prim replaces division by a constant with multiplication by its reciprocal on "
        "every device but the CPU (device.type != 'cpu'); answering None for torchplug devices "
        "keeps the CPU's true division and its numbers. Verified with div_prim's source.",
        "6ee83852cd68",
        _no_constant_divisor,
        depends_on=("div_prim",),
    ),
)


def _relied_on(module: str, name: str, why: str, signature: str) -> TorchInternal:
    return TorchInternal(module, name, why, Check.SIGNATURE, _in_both_releases(signature))


_CODEGEN = "torch._inductor.codegen"
RELIED_ON: tuple[TorchInternal, ...] = (
    _relied_on(
        "torch._dynamo.device_interface",
        "register_interface_for_device",
        "registers the device interface",
        "(device, device_interface)",
    ),
    _relied_on(
        f"{_CODEGEN}.common",
        "register_backend_for_device",
        "registers C++ scheduling, the wrapper and the cache-key pass by keyword",
        "(device, device_scheduling, device_wrapper_codegen, device_cpp_wrapper_codegen, "
        "device_fx_wrapper_codegen, device_custom_pass, device_custom_config)",
    ),
    _relied_on(
        f"{_CODEGEN}.common",
        "register_device_op_overrides",
        "registers the device op overrides",
        "(device, device_op_overrides)",
    ),
    _relied_on(
        f"{_CODEGEN}.wrapper",
        "PythonWrapperCodegen._generate_kernel_call_helper",
        "overridden (private) to launch each C++ kernel through the device's launch path",
        "(self, kernel_name, call_args, device, triton, arg_types, raw_keys, raw_args, "
        "triton_meta, inductor_meta, graph_name, original_fxnode_name, current_stream_idx)",
    ),
    _relied_on(
        f"{_CODEGEN}.wrapper",
        "PythonWrapperCodegen.make_allocation",
        "overridden to allocate from the device's caching allocator",
        "(self, name, device, dtype, shape, stride, allocation_shape, is_pinned)",
    ),
    _relied_on(
        f"{_CODEGEN}.wrapper",
        "PythonWrapperCodegen.write_header",
        "overridden to import the launch and allocation fast paths",
        "(self)",
    ),
    _relied_on(
        f"{_CODEGEN}.wrapper",
        "PythonWrapperCodegen.create",
        "overridden to create the device's wrapper and subgraph wrapper",
        "(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)",
    ),
    _relied_on(
        f"{_CODEGEN}.wrapper",
        "SubgraphPythonWrapperCodegen.__init__",
        "subclassed; created with these arguments",
        "(self, subgraph_name, parent_wrapper, partition_signatures)",
    ),
    _relied_on(
        f"{_CODEGEN}.wrapper",
        "PythonWrapperCodegen.define_kernel",
        "overridden to bind a C++ kernel of a device the host cannot address to its device image",
        "(self, kernel_name, kernel_body, metadata, gpu, cpp_definition)",
    ),
    TorchInternal(
        f"{_CODEGEN}.cpp",
        "CppScheduling.define_kernel",
        "writes each C++ kernel for the Python wrapper as async_compile.cpp_pybinding(arg_types, "
        "source) with the function named `kernel`, which device_code rewrites into a device image",
        Check.SOURCE,
        _in_both_releases("cb49d1f129cd"),
    ),
    _relied_on(
        "torch._inductor.codecache",
        "CppCodeCache.load_async",
        "compiles a device image with Inductor's C++ settings and extra link flags",
        "(main_code, device_type, submit_fn, extra_flags, optimized_code, needs_vec_isa, "
        "kernel_needs_vec_isa)",
    ),
    _relied_on(
        "torch._inductor.codecache",
        "LambdaFuture.__init__",
        "a device image compiled in parallel, resolved by the wrapper's async_compile.wait",
        "(self, result_fn, future)",
    ),
    _relied_on(
        "torch._inductor.async_compile",
        "AsyncCompile.submit",
        "hands a device image's compilation to Inductor's compile workers",
        "(task)",
    ),
    _relied_on(
        "torch._inductor.async_compile",
        "get_compile_threads",
        "whether Inductor compiles in parallel",
        "()",
    ),
    _relied_on(
        "torch._inductor.ir",
        "get_device_type",
        "asked by the replacements for a node's device type",
        "(x)",
    ),
    _relied_on(
        "torch._inductor.exc",
        "InductorError.__init__",
        "the failure of a graph's code generation; its inner_exception is explained",
        "(self, inner_exception, first_useful_frame)",
    ),
)
