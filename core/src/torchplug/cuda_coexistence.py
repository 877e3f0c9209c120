"""What torchplug does when a PrivateUse1 backend activates on a machine with an NVIDIA GPU.

Once PrivateUse1 hooks are registered, torch 2.15's ``at::getAccelerator()``
answers PrivateUse1, and the autograd engine gives a backward node a stream
only for tensors of that device type: every backward over CUDA tensors then
fails (``opt_ready_stream && opt_parent_stream`` in engine.cpp,
pytorch/pytorch#161129). torchplug cannot give the accelerator back once the
hooks are registered.

The policy: the backend keeps working (it was installed to be used), and
torchplug warns once per process, at activation, when CUDA is available, saying
that CUDA autograd breaks and how to turn the backend off
(``TORCHPLUG_DISABLE=<name>``, or ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` for
every backend). ``torchplug doctor`` shows the same finding. HPU backends are
not concerned: HPU never becomes the accelerator ahead of CUDA.
"""

from __future__ import annotations

import glob
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from torchplug import settings
from torchplug.device_kind import kind_of

log = logging.getLogger("torchplug")

UPSTREAM_ISSUE = "https://github.com/pytorch/pytorch/issues/161129"

_lock = threading.Lock()
_warned = False


class Coexistence(NamedTuple):
    """How a PrivateUse1 backend and CUDA share this process."""

    cuda_available: bool
    privateuse1_backend: str | None
    # CUDA backward fails in this process (both present).
    cuda_autograd_broken: bool
    # What to tell the user; empty when there is nothing to say.
    message: str


def _cuda_available() -> bool:
    """Whether this torch has CUDA and the machine an NVIDIA GPU, without
    initialising CUDA: ``torch.cuda.is_available()`` during ``import torch``
    would initialise the driver, and CUDA then fails in forked children."""
    import torch

    return bool(torch.backends.cuda.is_built() and glob.glob("/dev/nvidia[0-9]*"))


def assess(
    privateuse1_backend: str | None, cuda_available: Callable[[], bool] = _cuda_available
) -> Coexistence:
    """The finding for a process whose PrivateUse1 key belongs to ``privateuse1_backend``
    (None when no torchplug backend holds it); ``cuda_available`` is asked only then."""
    if privateuse1_backend is None:
        return Coexistence(False, None, False, "")
    cuda = cuda_available()
    if not cuda:
        return Coexistence(False, privateuse1_backend, False, "")
    name = privateuse1_backend
    message = (
        f"torchplug backend '{name}' holds PrivateUse1, which torch makes the process's "
        f"accelerator ahead of CUDA: backward over CUDA tensors fails in this process "
        f"(opt_ready_stream && opt_parent_stream, {UPSTREAM_ISSUE}). If this process trains "
        f"on CUDA, disable the backend with {settings.DISABLE}={name} "
        f"(or {settings.AUTOLOAD}=0 for every backend)."
    )
    return Coexistence(True, name, True, message)


def warn_at_activation(
    backend: str,
    dispatch_key: str = "privateuse1",
    cuda_available: Callable[[], bool] = _cuda_available,
) -> Coexistence:
    """Called by the activation of every backend, once its ``dispatch_key`` is registered:
    for a PrivateUse1 one, logs the finding, once per process (hpu has nothing to say)."""
    global _warned
    ahead_of_cuda = kind_of(dispatch_key).accelerator_ahead_of_cuda
    finding = assess(backend if ahead_of_cuda else None, cuda_available)
    if finding.cuda_autograd_broken:
        with _lock:
            first = not _warned
            _warned = True
        if first:
            log.warning("%s", finding.message)
    return finding
