"""Checks of the kernel-modules extension: an image loads, its functions launch on a
stream with pointer and scalar arguments, and misuse fails with a status.

The checks launch the core's device kernels (``torchplug_binary`` of
``device_kernels/kernel_abi.h``), from the image torchplug would hand the driver:
``$TORCHPLUG_KERNEL_IMAGE`` if set, else the one shipped for the driver's format.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import struct
from ctypes import byref, create_string_buffer
from pathlib import Path
from typing import Any

from torchplug_testing.driver.bindings import (
    CopyKind,
    ErrorCode,
    ExtensionType,
    KernelArgKind,
    TPD_Kernel_Launch_Args,
    TPD_KernelArg,
    TPD_Module_GetFunction_Args,
    TPD_Module_Load_Args,
    TPD_Module_Unload_Args,
    new,
)
from torchplug_testing.driver.harness import CheckFailure, Context, Skip, check, ensure
from torchplug_testing.driver.loader import DriverError

# kernel_abi.h's codes: float32 elements; add, mul.
_FLOAT32, _ADD, _MUL = 0, 0, 2
IMAGE_VARIABLE = "TORCHPLUG_KERNEL_IMAGE"


def _image(ctx: Context) -> bytes:
    """The image for the driver's format; skips the check when none is found."""
    if ExtensionType.KERNEL_MODULES not in ctx.driver.extensions:
        raise Skip("the driver offers no KERNEL_MODULES extension")
    format_name = ctx.driver.extensions[ExtensionType.KERNEL_MODULES].image_format
    if not format_name:
        raise CheckFailure("the kernel-modules extension names no image_format")
    if os.environ.get(IMAGE_VARIABLE):
        return Path(os.environ[IMAGE_VARIABLE]).read_bytes()
    spec = importlib.util.find_spec("torchplug")  # its location only: importing it imports torch
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder, "device_kernels", f"{format_name.decode()}.so")
        if path.is_file():
            return path.read_bytes()
    raise Skip(f"no image of format {format_name.decode()} (set {IMAGE_VARIABLE} to one)")


def _modules(ctx: Context, member: str, struct_type: Any, **values: Any) -> Any:
    args = new(struct_type, client=ctx.client, **values)
    ctx.driver.call_extension(ExtensionType.KERNEL_MODULES, member, byref(args))
    return args


def _load(ctx: Context, image: bytes) -> int:
    buffer = create_string_buffer(image, len(image))
    args = _modules(
        ctx,
        "module_load",
        TPD_Module_Load_Args,
        image=ctypes.addressof(buffer),
        image_size=len(image),
    )
    return args.module


def _function(ctx: Context, module: int | None, name: bytes) -> int:
    return _modules(
        ctx, "module_get_function", TPD_Module_GetFunction_Args, module=module, name=name
    ).function


def _arguments(*values: tuple[KernelArgKind, Any]) -> Any:
    array = (TPD_KernelArg * len(values))()
    for slot, (kind, value) in zip(array, values, strict=True):
        slot.kind = kind
        member = {KernelArgKind.POINTER: "pointer", KernelArgKind.INT64: "int64"}.get(
            kind, "float64"
        )
        setattr(slot.value, member, value)
    return array


def _launch(ctx: Context, stream: int, function: int | None, arguments: Any) -> None:
    _modules(
        ctx,
        "kernel_launch",
        TPD_Kernel_Launch_Args,
        stream=stream,
        function=function,
        args=ctypes.cast(arguments, ctypes.POINTER(TPD_KernelArg)),
        arg_count=len(arguments),
    )


def _binary(
    out: int, a: int, b: int | None, count: int, op: int, alpha: float, scalar: float
) -> Any:
    pointer, integer, number = KernelArgKind.POINTER, KernelArgKind.INT64, KernelArgKind.FLOAT64
    return _arguments(
        (pointer, out), (pointer, a), (pointer, b), (integer, count), (integer, _FLOAT32),
        (integer, op), (number, alpha), (number, scalar),
    )  # fmt: skip


def _upload(ctx: Context, stream: int, values: list[float]) -> int:
    size = 4 * len(values)
    pointer = ctx.allocate(size)
    ctx.copy(stream, pointer, create_string_buffer(struct.pack(f"{len(values)}f", *values), size), size,
             CopyKind.HOST_TO_DEVICE)  # fmt: skip
    return pointer


def _download(ctx: Context, stream: int, pointer: int, count: int) -> list[float]:
    result = create_string_buffer(4 * count)
    ctx.copy(stream, result, pointer, 4 * count, CopyKind.DEVICE_TO_HOST)
    ctx.synchronize(stream)
    return list(struct.unpack(f"{count}f", result.raw))


@check
def check_kernel_modules(ctx: Context) -> None:
    """A kernel of a loaded module runs on a stream over device memory, in the stream's
    order, with pointer, integer and float arguments; a launch queued before its module
    is unloaded still runs; the unloaded module's handles are refused."""
    image = _image(ctx)
    module = _load(ctx, image)
    add = _function(ctx, module, b"torchplug_binary")
    stream, count = ctx.stream(), 1000
    a = _upload(ctx, stream, [float(i) for i in range(count)])
    b = _upload(ctx, stream, [0.5] * count)
    out = ctx.allocate(4 * count)
    _launch(ctx, stream, add, _binary(out, a, b, count, _ADD, 2.0, 0.0))
    ensure(
        _download(ctx, stream, out, count) == [i + 1.0 for i in range(count)],
        "a + 2 * b on the device gave other values",
    )
    # In place, with a number for the second operand; then unloaded while queued.
    _launch(ctx, stream, add, _binary(a, a, None, count, _MUL, 1.0, 3.0))
    _modules(ctx, "module_unload", TPD_Module_Unload_Args, module=module)
    ensure(
        _download(ctx, stream, a, count) == [3.0 * i for i in range(count)],
        "a *= 3 on the device gave other values",
    )
    ctx.expect(
        ErrorCode.INVALID_HANDLE,
        _launch,
        ctx,
        stream,
        add,
        _binary(out, a, b, count, _ADD, 1.0, 0.0),
    )
    ctx.expect(ErrorCode.INVALID_HANDLE, _function, ctx, module, b"torchplug_binary")
    for pointer in (a, b, out):
        ctx.free(pointer)
    ctx.destroy_stream(stream)


@check
def check_kernel_module_errors(ctx: Context) -> None:
    """Bytes that are no image, a missing function, a host pointer or an unknown argument
    kind are refused with a status; a kernel that fails fails its stream, reported by the
    next synchronize with the kernel's message, and the stream then works again."""
    image = _image(ctx)
    ctx.expect(ErrorCode.INVALID_ARGUMENT, _load, ctx, b"\x7fELF this is not a shared object" * 8)
    ctx.expect(ErrorCode.INVALID_ARGUMENT, _modules, ctx, "module_load", TPD_Module_Load_Args, image=None,
               image_size=0)  # fmt: skip
    module = _load(ctx, image)
    ctx.expect(ErrorCode.INVALID_ARGUMENT, _function, ctx, module, b"no_such_kernel")
    add = _function(ctx, module, b"torchplug_binary")
    stream, count = ctx.stream(), 16
    a = _upload(ctx, stream, [1.0] * count)
    host = create_string_buffer(4 * count)
    ctx.expect(ErrorCode.INVALID_HANDLE, _launch, ctx, stream, add,
               _binary(ctypes.addressof(host), a, a, count, _ADD, 1.0, 0.0))  # fmt: skip
    unknown = _binary(a, a, a, count, _ADD, 1.0, 0.0)
    unknown[3].kind = 7
    ctx.expect(ErrorCode.INVALID_ARGUMENT, _launch, ctx, stream, add, unknown)
    # Too few arguments: the kernel itself refuses them, on the device.
    _launch(ctx, stream, add, _arguments((KernelArgKind.POINTER, a)))
    failure = ctx.expect(ErrorCode.EXECUTION_FAILED, ctx.synchronize, stream)
    ensure(
        "torchplug_binary" in failure.message,
        f"the failure does not name the kernel: {failure.message}",
    )
    _launch(ctx, stream, add, _binary(a, a, a, count, _ADD, 1.0, 0.0))
    try:
        values = _download(ctx, stream, a, count)
    except DriverError as error:
        raise CheckFailure(
            f"the stream failed again after its failure was reported: {error}"
        ) from error
    ensure(values == [2.0] * count, "the stream ran other work after its failure")
    _modules(ctx, "module_unload", TPD_Module_Unload_Args, module=module)
    ctx.free(a)
    ctx.destroy_stream(stream)
