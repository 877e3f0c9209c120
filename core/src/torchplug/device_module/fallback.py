"""The fallback report: the operators that ran on the CPU fallback, as torch_xla's
"ops not lowered" metrics (``torch.<name>.fallback_report()``), and the opt-in
log line of each one's first fallback (``TORCHPLUG_WARN_FALLBACK=1``)."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from torchplug.device_kind import kind_of_device
from torchplug.device_module._device import BoundDevice

log = logging.getLogger("torchplug.fallback")

# Where a vendor learns to give an operator a kernel of its device.
KERNEL_GUIDE = (
    "https://github.com/torchplug/torchplug/blob/main/docs/vendor-guide.md"
    "#3-the-c-half-fused-kernels-on-the-current-stream"
)


class FallbackOperator(NamedTuple):
    """One operator the CPU fallback ran on a device type.

    ``operator`` is its schema name and overload (``"aten::erfinv"``,
    ``"aten::sort.values_stable"``); ``calls`` the calls that completed;
    ``bytes`` those of the dense device tensors the calls read or wrote and of
    the new tensors they returned (an in-place or ``out=`` result is its
    argument, counted once); ``seconds`` the time spent in the fallback
    (steady clock), moving the data as well as running the CPU's kernel.
    """

    operator: str
    calls: int
    bytes: int
    seconds: float


def functions(bound: BoundDevice) -> dict[str, Any]:
    """The fallback report part of ``torch.<name>``, by attribute name."""
    key = bound.key

    def fallback_report() -> list[FallbackOperator]:
        """The operators that ran on the CPU fallback on every device of this type
        since the process started (or the last ``reset_fallback_report()``), the
        most time first. An operator missing here has a kernel of the device, or
        did not run."""
        rows = [
            FallbackOperator(operator, calls, size, nanoseconds / 1e9)
            for operator, calls, size, nanoseconds in bound.native().fallback_report(key)
        ]
        return sorted(rows, key=lambda row: (-row.seconds, row.operator))

    def reset_fallback_report() -> None:
        """Starts the fallback report of this device type afresh (the warnings of
        ``TORCHPLUG_WARN_FALLBACK`` are not repeated)."""
        bound.native().reset_fallback_report(key)

    return {
        "fallback_report": fallback_report,
        "reset_fallback_report": reset_fallback_report,
    }


def warn_on_fallback() -> None:
    """Logs (logger ``torchplug.fallback``, level WARNING) the first call of each
    operator the CPU fallback runs, once per operator and device type."""
    from torchplug import _C

    _C.set_fallback_notice(_log_fallback)


def _log_fallback(operator: str, device: str) -> None:
    device_type = device.partition(":")[0]
    # A dense kernel's dispatch key has the name of its device type (at::kHPU: HPU).
    dispatch_key = kind_of_device(device_type).aten_device_type.removeprefix("at::k")
    log.warning(
        "%s ran on the CPU fallback on %s: %s has no kernel for it, so the CPU runs it "
        "(slower than a kernel of the device, and never queued on a stream). Give it one with "
        'torch.library.impl("%s", "%s") or a C++ kernel (see %s); torch.%s.fallback_report() '
        "lists every operator that fell back.",
        operator,
        device,
        device_type,
        operator,
        dispatch_key,
        KERNEL_GUIDE,
        device_type,
    )
