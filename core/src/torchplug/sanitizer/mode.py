"""The dispatch mode that sees every operator and records its accesses in the
stream-order model, checking them before the operator runs."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchplug import _C
from torchplug.sanitizer.accesses import HOST, StreamKey, TensorFacts, tensor_facts
from torchplug.sanitizer.operators import (
    OpInfo,
    fresh_results,
    is_non_blocking,
    is_written,
    tensor_arguments,
)
from torchplug.sanitizer.reports import capture_stack
from torchplug.sanitizer.state import SanitizerState, join


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


class _Launch:
    """An operator's place in its stream's order, shared by all its accesses."""

    __slots__ = ("asynchronous", "clock", "others", "stack", "stream", "tick")

    def __init__(
        self,
        stream: StreamKey,
        clock: dict[StreamKey, int],
        tick: int,
        asynchronous: bool,
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.tick = tick
        self.asynchronous = asynchronous
        self.others: list[StreamKey] = []
        self.stack = capture_stack()


class SanitizerMode(TorchDispatchMode):
    def __init__(self, state: SanitizerState) -> None:
        super().__init__()
        self.state = state

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: tuple[type, ...],
        args: tuple = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        state = self.state
        info = state.info(func)
        if info.no_access:
            # Views touch no memory: the stream order they would drain can wait
            # for the next operator that does.
            return func(*args, **kwargs)
        with state.lock:
            state.drain(info.name)
            tensors = list(tensor_arguments(info, args, kwargs))
            launch = self._before(info, tensors, kwargs, is_non_blocking(info, args, kwargs))
        # Outside the lock: another thread's operators may run meanwhile.
        result = func(*args, **kwargs)
        with state.lock:
            # Memory freed meanwhile (by the operator, or by the garbage
            # collector at any allocation) may be what the results now reuse:
            # its free must reach the model before the results' first write.
            state.drain(info.name)
            self._after(info, tensors, result, launch)
        return result

    def _stream(self, device: torch.device) -> StreamKey:
        return (device.type, device.index, _C.current_stream_id(device.type, device.index))

    def _before(
        self,
        info: OpInfo,
        tensors: list[tuple[str, torch.Tensor]],
        kwargs: dict[str, Any],
        asynchronous: bool,
    ) -> _Launch | None:
        """Checks and records the accesses to the arguments (None: no device operator)."""
        state = self.state
        types = state.device_types
        devices = []
        for _, tensor in tensors:
            device = tensor.device
            if device.type in types and device not in devices:
                devices.append(device)
        # A factory, or a copy from the host or to another device, also names its target.
        target = kwargs.get("device")
        if isinstance(target, torch.device) and target.type in types:
            if target.index is None:
                target = torch.device(target.type, _C.current_device(target.type))
            if target not in devices:
                devices.append(target)
        if not devices:
            if state.host_memory:
                self._host_accesses(info, tensors)
            return None
        streams = [self._stream(device) for device in devices]
        launch = _Launch(streams[0], *state.launch(streams[0]), asynchronous)
        # A copy between devices is ordered after, and before, the current
        # streams of both (as torch.cuda's peer copies are).
        launch.others = streams[1:]
        for other in launch.others:
            join(launch.clock, state.clock(other))
        # An argument both read and written is checked once, as a write: that covers both.
        writes: dict[int, TensorFacts] = {}
        reads: dict[int, TensorFacts] = {}
        for name, tensor in tensors:
            kind = tensor.device.type
            # Host memory belongs to the device stream only in a non-blocking
            # copy; any other host argument (a scalar) is read before the launch returns.
            if kind not in types and not (asynchronous and kind == "cpu"):
                continue
            key = _storage(tensor)
            if kind == "cpu":
                state.host_memory.add(key)
            target = writes if is_written(info, name) else reads
            target.setdefault(key, tensor_facts(name, tensor))
        for key, description in reads.items():
            if key not in writes:
                self._record(launch, key, info.name, False, description)
        for key, description in writes.items():
            self._record(launch, key, info.name, True, description)
        return launch

    def _record(self, launch: _Launch, key: int, op: str, write: bool, tensor: TensorFacts) -> None:
        state = self.state
        if state.capturing and state.record_captured(
            launch.stream, (key, op, write, tensor, launch.stack)
        ):
            return
        state.access(key, launch.stream, launch.clock, launch.tick, op, write, tensor, launch.stack)

    def _host_accesses(self, info: OpInfo, tensors: list[tuple[str, torch.Tensor]]) -> None:
        """A host operator on memory a device stream touched asynchronously."""
        state = self.state
        tracked = [(name, t) for name, t in tensors if _storage(t) in state.host_memory]
        if not tracked:
            return
        clock, tick = state.host_launch()
        stack = capture_stack()
        for name, tensor in tracked:
            description = tensor_facts(name, tensor)
            state.access(
                _storage(tensor),
                HOST,
                clock,
                tick,
                info.name,
                is_written(info, name),
                description,
                stack,
            )

    def _after(
        self,
        info: OpInfo,
        tensors: list[tuple[str, torch.Tensor]],
        result: object,
        launch: _Launch | None,
    ) -> None:
        state = self.state
        types = state.device_types
        fresh = list(fresh_results(info, result))
        if launch is None:
            device = next((t.device for _, t in fresh if t.device.type in types), None)
            if device is None:
                # Host results are new memory: forget what an earlier allocation
                # at the same address did.
                if state.memory:
                    for _, tensor in fresh:
                        state.forget(_storage(tensor))
                return
            # A factory launches on its device's current stream.
            stream = self._stream(device)
            launch = _Launch(stream, *state.launch(stream), asynchronous=False)
        wrote_host = any(t.device.type == "cpu" and is_written(info, n) for n, t in tensors)
        for name, tensor in fresh:
            key = _storage(tensor)
            state.forget(key)
            kind = tensor.device.type
            if kind not in types:
                wrote_host = wrote_host or kind == "cpu"
                if not (launch.asynchronous and kind == "cpu"):
                    continue
                state.host_memory.add(key)
            self._record(launch, key, info.name, True, tensor_facts(name, tensor))
        for other in launch.others:
            join(state.clock(other), launch.clock)
        # The host waits for a blocking copy to the host, and for a result it needs.
        if info.host_sync or (wrote_host and not launch.asynchronous):
            state.host_waits_for(launch.clock)
