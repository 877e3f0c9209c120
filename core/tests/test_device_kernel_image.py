"""The device kernel image called directly, as a driver calls it: argument
checks and element types that the core's own launches never exercise."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import pytest
import torch

import torchplug
from torchplug_testing.driver.bindings import KERNEL_FORMAT_HOST_ELF, KernelArgKind, TPD_KernelArg

# The kernels' numbering of element types (device_kernels/kernel_abi.h, DType).
DTYPES = tuple(
    getattr(torch, name)
    for name in [
        "float32",
        "float64",
        "bfloat16",
        "bool",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
    ]
)
UNARY_EXP, UNARY_SILU = 4, 7


@pytest.fixture(scope="module")
def image() -> ctypes.CDLL:
    path = torchplug.get_device_kernel_image(KERNEL_FORMAT_HOST_ELF)
    assert path is not None
    return ctypes.CDLL(path)


def call(
    image: ctypes.CDLL, name: str, arguments: Sequence[torch.Tensor | int | float]
) -> tuple[int, str]:
    """Runs kernel ``name`` of the image over ``arguments``; its status and message."""
    argv = (TPD_KernelArg * len(arguments))()
    for slot, value in zip(argv, arguments, strict=True):
        if isinstance(value, torch.Tensor):
            slot.kind, slot.value.pointer = KernelArgKind.POINTER, value.data_ptr()
        elif isinstance(value, float):
            slot.kind, slot.value.float64 = KernelArgKind.FLOAT64, value
        else:
            slot.kind, slot.value.int64 = KernelArgKind.INT64, value
    message = ctypes.create_string_buffer(256)
    kernel = getattr(image, name)
    kernel.restype = ctypes.c_int
    status = kernel(argv, ctypes.c_size_t(len(arguments)), message, ctypes.c_size_t(len(message)))
    return status, message.value.decode()


def test_unary_gradient_of_an_operation_without_one_is_refused(image: ctypes.CDLL) -> None:
    grad, saved, out = torch.ones(4), torch.ones(4), torch.full((4,), 7.0)
    status, message = call(image, "torchplug_unary_backward", [out, grad, saved, 4, 0, UNARY_EXP])
    assert status != 0
    assert message == "has no gradient for operation 4"
    assert out.eq(7.0).all(), "a refused kernel wrote its output"


def test_unary_gradient_matches_torchs(image: ctypes.CDLL) -> None:
    x = torch.linspace(-3, 3, 16, dtype=torch.float64)
    grad = torch.rand(16, dtype=torch.float64)
    out = torch.empty_like(x)
    assert call(image, "torchplug_unary_backward", [out, grad, x, 16, 1, UNARY_SILU]) == (0, "")
    torch.testing.assert_close(out, torch.ops.aten.silu_backward(grad, x))


def test_arithmetic_kernels_refuse_an_element_type_they_do_not_compute(image: ctypes.CDLL) -> None:
    a = torch.ones(4, dtype=torch.int64)
    status, message = call(
        image, "torchplug_unary", [a, a, 4, DTYPES.index(torch.int64), UNARY_EXP]
    )
    assert status != 0
    assert message == "has no arithmetic element type 8"


@pytest.mark.parametrize("source", DTYPES, ids=str)
def test_conversion_numbers_each_type_as_torch_converts_it(
    image: ctypes.CDLL, source: torch.dtype
) -> None:
    values = torch.tensor([-3.7, -1.0, 0.0, 0.4, 1.5, 2.0, 100.25, 255.0], dtype=torch.float64)
    data = values.to(source)
    for target in DTYPES:
        out = torch.empty(len(values), dtype=target)
        status = call(
            image,
            "torchplug_convert",
            [out, data, len(values), DTYPES.index(target), DTYPES.index(source)],
        )
        assert status == (0, ""), (source, target)
        torch.testing.assert_close(
            out, data.to(target), rtol=0, atol=0, msg=f"{source} -> {target}"
        )


def test_conversion_refuses_an_unknown_type(image: ctypes.CDLL) -> None:
    data = torch.ones(2)
    status, message = call(image, "torchplug_convert", [data, data, 2, len(DTYPES), 0])
    assert status != 0
    assert (
        message
        == f"converts between element types 0 to {len(DTYPES) - 1}, not from 0 to {len(DTYPES)}"
    )
