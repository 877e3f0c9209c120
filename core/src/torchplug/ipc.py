"""Device tensors sent to other processes, as CUDA tensors are.

``torch.multiprocessing`` pickles CUDA tensors as IPC handles and every other
device through the CPU's file-descriptor path, which refuses device memory in
the queue's feeder thread: the receiver waits forever. A torchplug device
tensor is sent as the IPC handle of its storage, from the driver's IPC
extension (see ``csrc/memory/ipc.cpp``), with the storage's size; the receiver
opens the handle once per process (later tensors of the same storage reuse
it) and the storage it backs closes it when freed. As with CUDA, the sender
keeps the tensor alive while receivers use it; the sender keeps it at least
until the receiver has opened it (see ``_Sent``), so a worker may return a
tensor it drops at once, as pools and DataLoader workers do.
"""

from __future__ import annotations

import functools
import mmap
import os
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef, shared_cache, storage_from_cache

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
            handle = torch.ops.torchplug.share_memory_(tensor.detach())
        storage = tensor.untyped_storage()
        return (
            rebuild_device_tensor,
            (
                _sent().keep(storage),
                bytes(handle),
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


class _Sent:
    """The storages this process sent that their receivers have not opened yet: kept
    alive until then, since the sender may drop a tensor as soon as it is sent.

    Each send takes a slot of a small shared memory file (a memfd, which the receiver
    opens through ``/proc/<pid>/fd``); the receiver zeroes the slot once it opened the
    handle, and the sender lets go of the storages of zeroed slots at its next send.
    """

    SLOTS = 4096

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.fd = os.memfd_create("torchplug-ipc-sent", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, self.SLOTS)
        self.flags = mmap.mmap(self.fd, self.SLOTS)
        self.pending: dict[int, torch.UntypedStorage] = {}
        self.lock = threading.Lock()

    def keep(self, storage: torch.UntypedStorage) -> tuple[int, int, int]:
        """Keeps ``storage`` until the receiver acknowledges the returned slot."""
        with self.lock:
            for slot in [slot for slot in self.pending if self.flags[slot] == 0]:
                del self.pending[slot]
            free = next((slot for slot in range(self.SLOTS) if slot not in self.pending), None)
            if free is None:
                raise RuntimeError(
                    f"{self.SLOTS} device tensors this process sent were not received yet; "
                    "receive them (queue.get()) before sending more."
                )
            self.flags[free] = 1
            self.pending[free] = storage
        return self.pid, self.fd, free


@functools.cache
def _sent_in(pid: int) -> _Sent:
    return _Sent()


def _sent() -> _Sent:
    """This process's _Sent (a forked child makes its own)."""
    return _sent_in(os.getpid())


def _acknowledge(sender: tuple[int, int, int]) -> None:
    """Tells the sender its storage was opened here, so it may let go of it."""
    pid, fd, slot = sender
    try:
        with open(f"/proc/{pid}/fd/{fd}", "r+b") as file, mmap.mmap(file.fileno(), 0) as flags:
            flags[slot] = 0
    except OSError:  # the sender exited: it keeps nothing any more
        pass


def rebuild_device_tensor(
    sender: tuple[int, int, int],
    handle: bytes,
    nbytes: int,
    device: str,
    dtype: torch.dtype,
    storage_offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    requires_grad: bool,
    parameter: bool,
) -> torch.Tensor:
    """The receiving side: a tensor over the sender's memory."""
    try:
        storage = _open(handle, nbytes, torch.device(device))
    finally:
        _acknowledge(sender)
    tensor = torch.empty(0, dtype=dtype, device=device)
    tensor.set_(storage, storage_offset, size, stride)
    if parameter:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)


def _open(handle: bytes, nbytes: int, device: torch.device) -> torch.UntypedStorage:
    """The storage ``handle`` names, opened once per process while it lives."""
    key = ("torchplug", str(device), handle)
    storage = storage_from_cache(torch.UntypedStorage, key) if handle else None
    if storage is None:
        opened = torch.ops.torchplug.from_ipc_handle(list(handle), nbytes, device)
        storage = opened.untyped_storage()
        if handle:
            shared_cache[key] = StorageWeakRef(storage)
    return storage
