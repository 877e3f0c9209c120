"""Inductor's C++ kernels as device images.

Each generated kernel's source is compiled with an entry point of the
driver's kernel ABI (``torchplug/driver.h``: ``int f(const TPD_KernelArg*,
size_t, char*, size_t)``), as a GPU compiles generated Triton kernels, so
that the kernel can be queued on a stream and run without the interpreter.

- On a device whose memory the host cannot address (the remote driver's
  device process), the image is loaded into the device through the driver's
  kernel-module extension and launched there on the current stream
  (``torchplug._C.launch_device_code``): operands stay in device memory.
- On a device whose memory is host memory (the simulated devices), the core
  calls the entry point in this process, queued on the current stream like an
  eager kernel (``torchplug._C.launch_host_code``).

Images are the driver's ``torchplug-host-elf-1`` format: shared objects for this
host, built by Inductor's own C++ compiler settings (its vector ISA, OpenMP),
with a run path to torch's libraries for the vector math they may call.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from pathlib import Path
from typing import Any, ClassVar

import torch

from torchplug import _C

logger = logging.getLogger(__name__)

HOST_ELF_FORMAT = "torchplug-host-elf-1"
ENTRY_POINT = "torchplug_compiled_kernel"
# What Inductor's C++ scheduling writes to define a kernel for the Python wrapper.
PYBINDING_DEFINITION = "async_compile.cpp_pybinding("
# The first line of a device kernel's source, before the device type.
SOURCE_MARK = "// torchplug device image for "

_DRIVER_HEADER = Path(__file__).parents[1] / "include" / "torchplug" / "driver.h"


def check_runs_generated_code(device_type: str) -> None:
    """Raises, naming what to do instead, when compiled kernels cannot reach the device."""
    image_format = _C.kernel_image_format(device_type)
    if image_format == HOST_ELF_FORMAT:
        return
    loads = (
        f"loads images of format {image_format!r}" if image_format else "loads no kernel modules"
    )
    raise NotImplementedError(
        f"torch.compile cannot run generated kernels on '{device_type}': its memory is not "
        f"host-addressable and its driver {loads}, while torchplug builds {HOST_ELF_FORMAT!r} "
        'images. Compile with backend="aot_eager" (the traced graph runs on the device\'s own '
        "kernels), or run the model without torch.compile."
    )


def entry_point(arg_types: list[str]) -> str:
    """C++ that calls the generated ``kernel`` with the launch's arguments, checked
    against ``arg_types`` (Inductor's C++ spelling of each parameter's type)."""
    reads = []
    names = []
    for position, spelled in enumerate(arg_types):
        name = f"arg{position}"
        names.append(name)
        reads.append(
            f"  std::remove_const_t<{spelled}> {name}{{}};\n"
            f"  if (!torchplug_read(args[{position}], {name})) {{\n"
            f'    std::snprintf(message, message_size, "argument {position} is not a {spelled}");\n'
            "    return 1;\n"
            "  }\n"
        )
    count = len(arg_types)
    return f"""
#include <cstddef>
#include <cstdio>
#include <exception>
#include <type_traits>
#include "{_DRIVER_HEADER}"

template <typename T>
static bool torchplug_read(const TPD_KernelArg& arg, T& out) {{
  if constexpr (std::is_pointer_v<T>) {{
    out = static_cast<T>(arg.value.pointer);
    return arg.kind == TPD_KERNEL_ARG_POINTER;
  }} else if constexpr (std::is_floating_point_v<T>) {{
    out = arg.kind == TPD_KERNEL_ARG_INT64 ? static_cast<T>(arg.value.int64) : static_cast<T>(arg.value.float64);
    return arg.kind == TPD_KERNEL_ARG_INT64 || arg.kind == TPD_KERNEL_ARG_FLOAT64;
  }} else {{
    out = static_cast<T>(arg.value.int64);
    return arg.kind == TPD_KERNEL_ARG_INT64;
  }}
}}

extern "C" __attribute__((visibility("default"))) int {ENTRY_POINT}(
    const TPD_KernelArg* args, size_t count, char* message, size_t message_size) {{
  if (count != {count}) {{
    std::snprintf(message, message_size, "takes {count} arguments, %zu given", count);
    return 1;
  }}
{"".join(reads)}  try {{
    kernel({", ".join(names)});
  }} catch (const std::exception& error) {{
    std::snprintf(message, message_size, "%s", error.what());
    return 1;
  }}
  return 0;
}}
"""


class DeviceKernel:
    """A generated kernel loaded for the devices of one device type. Where their
    memory is host-addressable, ``function`` is the address of the image's entry
    point in this process (Inductor loaded the image), which
    ``torchplug._C.launch_host_code`` calls; elsewhere the image is loaded into
    the devices and ``function`` is what ``torchplug._C.launch_device_code``
    launches."""

    def __init__(self, device_type: str, library: ctypes.CDLL) -> None:
        self.device_type = device_type
        self.image = Path(library._name)
        if _C.host_addressable(device_type):
            self._library = library  # keeps the entry point loaded
            self.function: int = ctypes.cast(getattr(library, ENTRY_POINT), ctypes.c_void_p).value
        else:
            self.function = _load(device_type, str(self.image))


@functools.cache
def _load(device_type: str, image: str) -> int:
    """Each image is loaded once per device type: the FX graph cache hands the
    same kernels to every graph that has them."""
    logger.debug("loading %s into the '%s' devices", image, device_type)
    return _C.load_device_function(device_type, Path(image).read_bytes(), ENTRY_POINT)


@functools.cache
def _image_code_cache() -> type:
    """Inductor's C++ code cache, building images as it builds the CPU's kernels:
    shared objects without libtorch, compiled against the precompiled header of
    Inductor's C++ prefix (torch._inductor.codecache: CppCodeCache, and
    CppPythonBindingsCodeCache._get_uncompiled_header for the header, present
    in torch 2.14 and 2.15). Without that header every kernel parses the
    prefix again: compiling took 1.5-1.9x the CPU's time."""
    from torch._inductor.codecache import CppCodeCache, CppPythonBindingsCodeCache

    class ImageCodeCache(CppCodeCache):
        cache: ClassVar[dict[str, Any]] = {}
        cache_clear = staticmethod(cache.clear)
        cpp_compile_command_flags: ClassVar[dict[str, Any]] = {
            "include_pytorch": False,
            "shared": True,
        }

        @classmethod
        def _get_uncompiled_header(cls, device: str) -> str | None:
            return CppPythonBindingsCodeCache._get_uncompiled_header(device)

    return ImageCodeCache


@functools.cache
def _link_flags() -> tuple[str, ...]:
    # The device loads the image in a process of its own: vectorised kernels
    # call the vector math library inside torch's CPU library, found by run path.
    return (f"-Wl,-rpath,{Path(torch.__file__).parent / 'lib'}",)


def device_kernel(async_compile: Any, device_type: str, arg_types: list[str], source: str) -> Any:
    """What a generated wrapper binds a kernel's name to on ``device_type``: the
    :class:`DeviceKernel` of ``source``, or a future of it when Inductor compiles
    in parallel (``async_compile.wait`` resolves it with the wrapper's others)."""
    from torch._inductor.async_compile import get_compile_threads
    from torch._inductor.codecache import LambdaFuture

    if not _C.host_addressable(device_type):  # else the core runs the image itself
        check_runs_generated_code(device_type)
    parallel = get_compile_threads() > 1
    get_library = _image_code_cache().load_async(
        source + entry_point(arg_types),
        submit_fn=async_compile.submit if parallel else None,
        extra_flags=_link_flags(),
    )

    def load() -> DeviceKernel:
        return DeviceKernel(device_type, get_library())

    return LambdaFuture(load) if parallel else load()
