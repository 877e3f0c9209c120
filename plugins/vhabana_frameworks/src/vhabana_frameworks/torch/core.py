"""Graph-mode style controls of the simulated HPU."""

import torch


def mark_step(device_str: str = "", sync: bool = False) -> None:
    """Marks the end of a step: waits until the work queued so far on every
    ``hpu`` device has run.

    On Gaudi in lazy mode this is where the accumulated graph is compiled and
    launched. The simulated device runs operators eagerly, so here it is a
    synchronisation point: after it, every queued copy and kernel has finished.
    ``device_str`` and ``sync`` are accepted for compatibility.
    """
    del device_str, sync
    for index in range(torch.hpu.device_count()):
        torch.hpu.synchronize(index)
