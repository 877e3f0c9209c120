"""Device tensors sent to other processes, as CUDA tensors are.

``torch.multiprocessing`` pickles CUDA tensors as IPC handles and every other
device through the CPU's file-descriptor path, which refuses device memory in
the queue's feeder thread: the receiver waits forever. A torchplug device
tensor is sent as the file descriptor of the shared memory its storage moves
into (see ``csrc/memory/ipc.cpp``); the receiver maps the same pages.
"""

from __future__ import annotations

import functools
import multiprocessing.reduction
from collections.abc import Callable
from typing import Any

import torch

_devices: set[str] = set()


def share_between_processes(device: str) -> None:
    """Makes ``torch.multiprocessing`` share tensors of ``device`` (idempotent)."""
    _devices.add(device)
    _install()


@functools.cache
def _install() -> None:
    from multiprocessing.reduction import ForkingPickler

    for tensor_type in (torch.Tensor, torch.nn.Parameter):
        upstream = ForkingPickler._extra_reducers.get(tensor_type)
        if upstream is not None:
            ForkingPickler.register(tensor_type, _sharing_device_tensors(upstream))


def _sharing_device_tensors(
    upstream: Callable[[torch.Tensor], Any],
) -> Callable[[torch.Tensor], Any]:
    def reduce(tensor: torch.Tensor) -> Any:
        if tensor.device.type not in _devices or tensor.layout != torch.strided:
            return upstream(tensor)
        if tensor.requires_grad and not tensor.is_leaf:
            raise RuntimeError(
                "Cowardly refusing to serialize non-leaf tensor which requires_grad, "
                "since autograd does not support crossing process boundaries.  "
                "If you just want to transfer the data, call detach() on the tensor "
                "before serializing (e.g., putting it on the queue)."
            )
        with torch.no_grad():
            fd = torch.ops.torchplug.share_memory_(tensor.detach())
        storage = tensor.untyped_storage()
        return (
            rebuild_device_tensor,
            (
                multiprocessing.reduction.DupFd(fd),
                storage.nbytes(),
                str(tensor.device),
                tensor.dtype,
                tensor.storage_offset(),
                tuple(tensor.size()),
                tuple(tensor.stride()),
                tensor.requires_grad,
                type(tensor) is torch.nn.Parameter,
            ),
        )

    return reduce


def rebuild_device_tensor(
    shared_fd: Any,
    nbytes: int,
    device: str,
    dtype: torch.dtype,
    storage_offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    requires_grad: bool,
    parameter: bool,
) -> torch.Tensor:
    """The receiving side: a tensor over the sender's pages."""
    pages = torch.ops.torchplug.from_shared_memory(shared_fd.detach(), nbytes, torch.device(device))
    tensor = torch.empty(0, dtype=dtype, device=device)
    tensor.set_(pages.untyped_storage(), storage_offset, size, stride)
    if parameter:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)
