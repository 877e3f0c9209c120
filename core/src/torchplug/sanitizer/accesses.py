"""What the sanitizer remembers of each access to memory, and where it happened."""

from __future__ import annotations

from dataclasses import dataclass
from types import CodeType

import torch

# (device type, device index, stream id); the host is one more "stream".
StreamKey = tuple[str, int, int]
HOST: StreamKey = ("host", -1, 0)
# An argument's name (or "result N"), shape, dtype and device.
TensorFacts = tuple[str, torch.Size, torch.dtype, torch.device]
# The frames that launched an operator, innermost first, unformatted.
Frames = list[tuple[CodeType, int]]


def tensor_facts(name: str, tensor: torch.Tensor) -> TensorFacts:
    """What a report says about a tensor, kept unformatted until there is a report."""
    return name, tensor.shape, tensor.dtype, tensor.device


# An access an operator on a capturing stream makes at each replay of the graph:
# the memory's key, the operator, whether it writes, the tensor, the launching frames.
CapturedAccess = tuple[int, str, bool, TensorFacts, Frames]


# eq=False: two accesses with the same facts are still two events (and stay hashable).
@dataclass(slots=True, eq=False)
class Access:
    stream: StreamKey
    tick: int
    op: str
    kind: str
    tensor: TensorFacts
    stack: Frames


class Memory:
    """The accesses to one allocation since its last write."""

    __slots__ = ("reads", "record_streams", "write")

    def __init__(self) -> None:
        self.write: Access | None = None
        self.reads: dict[StreamKey, Access] = {}
        self.record_streams: set[StreamKey] = set()
