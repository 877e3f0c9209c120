"""The stream sanitizer: finds unsynchronized accesses to memory across streams.

Every operator on a torchplug device is seen through a dispatch mode and
checked against a model of the program's stream order: one vector clock per
stream and one for the host. An operator ticks the clock of the stream it is
launched on; event records, event waits and synchronizations (queued by the
core's C++ hooks in program order, see ``_C.take_stream_trace``) carry
clocks from one stream to another or to the host. An access conflicts with
an earlier one on the same memory when the earlier access is not ordered
before it (its tick is not in the accessing clock) and at least one of them
writes. Conflicts raise :class:`StreamRaceError` from the operator that makes
the second access, before it runs.

The check follows the program's order, not the device's timing, so it finds
a missing synchronization even when the device happened to be fast enough.
``TORCHPLUG_SANITIZER=1`` turns it on for every torchplug device when the
backends activate; :func:`enable`, :func:`disable` and :func:`enabled` do so
from code.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

from torchplug import _C

__all__ = ["StreamRaceError", "disable", "enable", "enabled", "is_enabled"]

_log = logging.getLogger(__name__)

# (device type, device index, stream id); the host is one more "stream".
StreamKey = tuple[str, int, int]
HOST: StreamKey = ("host", -1, 0)
# An argument's name (or "result N"), shape, dtype and device.
TensorFacts = tuple[str, torch.Size, torch.dtype, torch.device]

# Operators that touch no memory though their schema lists tensors.
_NO_ACCESS = frozenset({"record_stream", "is_pinned", "is_same_size", "is_set_to"})
# Operators whose result the host needs before it can go on: it waits for the
# stream (as torch.cuda's sync debug mode counts them).
_HOST_SYNC = frozenset(
    {
        "_local_scalar_dense",
        "equal",
        "nonzero",
        "masked_select",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "repeat_interleave",
    }
)
# Frames of the sanitizer itself and of the dispatch machinery (the mode's
# entry is wrapped by dynamo's disable) say nothing about where the user
# launched an operator.
_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_FILES = frozenset(
    {
        __file__,
        sys.modules[TorchDispatchMode.__module__].__file__,
        os.path.join(_TORCH_DIR, "_compile.py"),
        os.path.join(_TORCH_DIR, "_dynamo", "eval_frame.py"),
    }
)
_MAX_FRAMES = 64


class StreamRaceError(RuntimeError):
    """Two accesses to the same memory, at least one a write, that no
    synchronization orders: on a real accelerator their order, and so the
    result, depends on timing."""


class _OpInfo:
    """What an operator's schema says about the memory it touches (once per overload)."""

    __slots__ = (
        "fresh_returns",
        "host_sync",
        "name",
        "names",
        "no_access",
        "non_blocking",
        "writes",
    )

    def __init__(self, func: torch._ops.OpOverload) -> None:
        schema = func._schema
        self.name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        self.names = tuple(argument.name for argument in schema.arguments)
        self.writes = frozenset(
            argument.name
            for argument in schema.arguments
            if argument.alias_info is not None and argument.alias_info.is_write
        )
        # A return with no alias annotation is new memory the operator wrote.
        self.fresh_returns = tuple(ret.alias_info is None for ret in schema.returns)
        short = schema.name.split("::", 1)[-1]
        aliases_only = bool(schema.returns) and not any(self.fresh_returns) and not self.writes
        # Views and queries read no data: only their results' later uses do.
        self.no_access = short in _NO_ACCESS or aliases_only
        self.host_sync = short in _HOST_SYNC
        self.non_blocking = "non_blocking" in self.names


class _Access:
    __slots__ = ("kind", "op", "stack", "stream", "tensor", "tick")

    def __init__(
        self,
        stream: StreamKey,
        tick: int,
        op: str,
        kind: str,
        tensor: TensorFacts,
        stack: list[tuple[CodeType, int]],
    ) -> None:
        self.stream = stream
        self.tick = tick
        self.op = op
        self.kind = kind
        self.tensor = tensor
        self.stack = stack


class _Memory:
    """The accesses to one allocation since its last write."""

    __slots__ = ("reads", "record_streams", "write")

    def __init__(self) -> None:
        self.write: _Access | None = None
        self.reads: dict[StreamKey, _Access] = {}
        self.record_streams: set[StreamKey] = set()


def _stack() -> list[tuple[CodeType, int]]:
    """The caller's frames, innermost first, without formatting anything."""
    frames = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and len(frames) < _MAX_FRAMES:
        code = frame.f_code
        if code.co_filename not in _OWN_FILES:
            frames.append((code, frame.f_lineno))
        frame = frame.f_back
    return frames


def _format_stack(frames: list[tuple[CodeType, int]]) -> str:
    summary = traceback.StackSummary.from_list(
        [(code.co_filename, line, code.co_name, None) for code, line in reversed(frames)]
    )
    return "".join(summary.format()).rstrip() or "  (no Python frames)"


def _describe_stream(stream: StreamKey) -> str:
    if stream == HOST:
        return "the host"
    device, index, stream_id = stream
    return f"{device}:{index} stream {stream_id}"


def _tensor_facts(name: str, tensor: torch.Tensor) -> TensorFacts:
    """What a report says about a tensor, kept unformatted until there is a report."""
    return name, tensor.shape, tensor.dtype, tensor.device


def _describe_tensor(facts: TensorFacts) -> str:
    name, shape, dtype, device = facts
    what = name if name.startswith("result") else f"argument '{name}'"
    return f"{what} (shape [{', '.join(str(size) for size in shape)}], {dtype}, {device})"


def _join(into: dict[StreamKey, int], other: dict[StreamKey, int]) -> None:
    for stream, tick in other.items():
        if into.get(stream, 0) < tick:
            into[stream] = tick


class _State:
    """The stream-order model of one sanitized process."""

    def __init__(self, device_types: frozenset[str]) -> None:
        self.lock = threading.Lock()
        self.device_types = device_types
        self.infos: dict[torch._ops.OpOverload, _OpInfo] = {}
        self.clocks: dict[StreamKey, dict[StreamKey, int]] = {}
        self.host: dict[StreamKey, int] = {}
        # Bumped whenever the host clock changes, so launches skip joining an unchanged one.
        self.host_version = 0
        self.joined_host: dict[StreamKey, int] = {}
        self.events: dict[tuple[str, int], dict[StreamKey, int]] = {}
        self.memory: dict[int, _Memory] = {}
        # Host memory a device stream accesses (non-blocking copies): host ops on it are checked.
        self.host_memory: set[int] = set()

    def info(self, func: torch._ops.OpOverload) -> _OpInfo:
        info = self.infos.get(func)
        if info is None:
            info = self.infos[func] = _OpInfo(func)
        return info

    def clock(self, stream: StreamKey) -> dict[StreamKey, int]:
        clock = self.clocks.get(stream)
        if clock is None:
            clock = self.clocks[stream] = {}
        return clock

    def launch(self, stream: StreamKey) -> tuple[dict[StreamKey, int], int]:
        """Ticks `stream` for one operator; work issued after the host waited is
        ordered after what the host waited for."""
        clock = self.clock(stream)
        if self.joined_host.get(stream) != self.host_version:
            _join(clock, self.host)
            self.joined_host[stream] = self.host_version
        tick = clock.get(stream, 0) + 1
        clock[stream] = tick
        return clock, tick

    def host_launch(self) -> tuple[dict[StreamKey, int], int]:
        tick = self.host.get(HOST, 0) + 1
        self.host[HOST] = tick
        self.host_version += 1
        return self.host, tick

    def host_waits_for(self, clock: dict[StreamKey, int]) -> None:
        _join(self.host, clock)
        self.host_version += 1

    def drain(self, where: str) -> None:
        for kind, index, stream_id, handle, device in _C.take_stream_trace():
            stream = (device, index, stream_id)
            if kind == "event_record":
                clock = self.launch(stream)[0]
                self.events[(device, handle)] = dict(clock)
            elif kind == "event_wait":
                recorded = self.events.get((device, handle))
                if recorded is not None:
                    _join(self.clock(stream), recorded)
            elif kind == "event_synchronize":
                recorded = self.events.get((device, handle))
                if recorded is not None:
                    self.host_waits_for(recorded)
            elif kind == "event_destroy":
                self.events.pop((device, handle), None)
            elif kind == "stream_synchronize":
                self.host_waits_for(self.clock(stream))
            elif kind == "device_synchronize":
                for key, clock in list(self.clocks.items()):
                    if key[0] == device and key[1] == index:
                        self.host_waits_for(clock)
            elif kind == "memory_record_stream":
                memory = self.memory.get(handle)
                if memory is not None:
                    memory.record_streams.add(stream)
            elif kind == "memory_free":
                memory = self.memory.pop(handle, None)
                if memory is not None:
                    self._check_free(memory, stream, where)

    def _check_free(self, memory: _Memory, allocated_on: StreamKey, where: str) -> None:
        clock = self.clock(allocated_on)
        accesses = list(memory.reads.values())
        if memory.write is not None:
            accesses.append(memory.write)
        for access in accesses:
            if access.stream in (allocated_on, HOST) or access.stream in memory.record_streams:
                continue
            seen = max(clock.get(access.stream, 0), self.host.get(access.stream, 0))
            if seen >= access.tick:
                continue
            other = _describe_stream(access.stream)
            raise StreamRaceError(
                f"Memory freed while still in use on {other}: the tensor {_describe_tensor(access.tensor)} was "
                f"allocated on {_describe_stream(allocated_on)} and freed (noticed before "
                f"{where}) while {access.op} may still {access.kind} it on {other}; the "
                f"allocator may hand the memory out again on "
                f"{_describe_stream(allocated_on)} before {other} is done with it.\n"
                f"Fix to consider: call tensor.record_stream(<{other}>) before freeing it, or "
                f"make the allocation stream wait (wait_stream / an event) for {other}, or "
                f"synchronize {other} before the tensor is freed.\n\n"
                f"Last use ({access.op}, {access.kind}, {other}):\n"
                f"{_format_stack(access.stack)}\n\n"
                f"Freed before ({where}):\n{_format_stack(_stack())}"
            )

    def access(
        self,
        memory_key: int,
        stream: StreamKey,
        clock: dict[StreamKey, int],
        tick: int,
        op: str,
        write: bool,
        tensor: TensorFacts,
        stack: list[tuple[CodeType, int]],
    ) -> None:
        memory = self.memory.get(memory_key)
        if memory is None:
            memory = self.memory[memory_key] = _Memory()
        earlier = [memory.write] if memory.write is not None else []
        if write:
            earlier += memory.reads.values()
        for previous in earlier:
            if previous.stream != stream and clock.get(previous.stream, 0) < previous.tick:
                raise _race(previous, stream, op, "write" if write else "read", tensor, stack)
        current = _Access(stream, tick, op, "write" if write else "read", tensor, stack)
        if write:
            memory.write = current
            memory.reads = {}
        else:
            memory.reads[stream] = current

    def forget(self, memory_key: int) -> None:
        self.memory.pop(memory_key, None)
        self.host_memory.discard(memory_key)


def _race(
    first: _Access,
    stream: StreamKey,
    op: str,
    kind: str,
    tensor: TensorFacts,
    stack: list[tuple[CodeType, int]],
) -> StreamRaceError:
    earlier, later = _describe_stream(first.stream), _describe_stream(stream)
    if stream == HOST:
        fix = (
            f"synchronize {earlier} before the host uses the tensor (stream.synchronize(), "
            f"an event recorded after {first.op} and its synchronize(), or "
            f"torch.{first.stream[0]}.synchronize())"
        )
    elif first.stream == HOST:
        fix = f"synchronize {later} before the host changes the tensor"
    else:
        fix = (
            f"make {later} wait for {earlier} before {op} "
            f"(later_stream.wait_stream(earlier_stream), or an event recorded on {earlier} "
            f"after {first.op} and waited on by {later}), or synchronize"
        )
    return StreamRaceError(
        f"Stream race on {_describe_tensor(tensor)}: {op} ({kind}, {later}) is not ordered after "
        f"{first.op} ({first.kind}, {earlier}); on a device the {first.kind} on {earlier} "
        f"may still be running when the {kind} on {later} starts.\n"
        f"Fix to consider: {fix}.\n\n"
        f"{op} ({kind}, {later}; {_describe_tensor(tensor)}):\n{_format_stack(stack)}\n\n"
        f"{first.op} ({first.kind}, {earlier}; {_describe_tensor(first.tensor)}):\n"
        f"{_format_stack(first.stack)}"
    )


def _tensors(info: _OpInfo, args: tuple, kwargs: dict) -> Iterator[tuple[str, torch.Tensor]]:
    """The operator's tensor arguments by schema name, lists of tensors included."""
    names = info.names
    for position, value in enumerate(args):
        name = names[position] if position < len(names) else f"#{position}"
        yield from _named(name, value)
    for name, value in kwargs.items():
        yield from _named(name, value)


def _named(name: str, value: object) -> Iterator[tuple[str, torch.Tensor]]:
    # Sparse layouts have no one storage to key their memory by: not tracked.
    if isinstance(value, torch.Tensor):
        if value.layout == torch.strided:
            yield name, value
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            if isinstance(item, torch.Tensor) and item.layout == torch.strided:
                yield f"{name}[{position}]", item


def _returns(info: _OpInfo, result: object) -> Iterator[tuple[str, torch.Tensor]]:
    """The operator's fresh results (new memory it wrote)."""
    results = result if isinstance(result, tuple) else (result,)
    for position, (value, fresh) in enumerate(zip(results, info.fresh_returns, strict=False)):
        if fresh:
            yield from _named(f"result {position}", value)


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
        self.stack = _stack()


def _non_blocking(info: _OpInfo, args: tuple, kwargs: dict) -> bool:
    if not info.non_blocking:
        return False
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    position = info.names.index("non_blocking")
    return position < len(args) and bool(args[position])


def _written(info: _OpInfo, name: str) -> bool:
    return name.split("[", 1)[0] in info.writes


class _SanitizerMode(TorchDispatchMode):
    def __init__(self, state: _State) -> None:
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
            tensors = list(_tensors(info, args, kwargs))
            launch = self._before(info, tensors, kwargs, _non_blocking(info, args, kwargs))
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
        info: _OpInfo,
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
            _join(launch.clock, state.clock(other))
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
            target = writes if _written(info, name) else reads
            target.setdefault(key, _tensor_facts(name, tensor))
        for key, description in reads.items():
            if key not in writes:
                self._record(launch, key, info.name, False, description)
        for key, description in writes.items():
            self._record(launch, key, info.name, True, description)
        return launch

    def _record(self, launch: _Launch, key: int, op: str, write: bool, tensor: TensorFacts) -> None:
        self.state.access(
            key, launch.stream, launch.clock, launch.tick, op, write, tensor, launch.stack
        )

    def _host_accesses(self, info: _OpInfo, tensors: list[tuple[str, torch.Tensor]]) -> None:
        """A host operator on memory a device stream touched asynchronously."""
        state = self.state
        tracked = [(name, t) for name, t in tensors if _storage(t) in state.host_memory]
        if not tracked:
            return
        clock, tick = state.host_launch()
        stack = _stack()
        for name, tensor in tracked:
            description = _tensor_facts(name, tensor)
            state.access(
                _storage(tensor),
                HOST,
                clock,
                tick,
                info.name,
                _written(info, name),
                description,
                stack,
            )

    def _after(
        self,
        info: _OpInfo,
        tensors: list[tuple[str, torch.Tensor]],
        result: object,
        launch: _Launch | None,
    ) -> None:
        state = self.state
        types = state.device_types
        fresh = list(_returns(info, result))
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
        wrote_host = any(t.device.type == "cpu" and _written(info, n) for n, t in tensors)
        for name, tensor in fresh:
            key = _storage(tensor)
            state.forget(key)
            kind = tensor.device.type
            if kind not in types:
                wrote_host = wrote_host or kind == "cpu"
                if not (launch.asynchronous and kind == "cpu"):
                    continue
                state.host_memory.add(key)
            self._record(launch, key, info.name, True, _tensor_facts(name, tensor))
        for other in launch.others:
            _join(state.clock(other), launch.clock)
        # The host waits for a blocking copy to the host, and for a result it needs.
        if info.host_sync or (wrote_host and not launch.asynchronous):
            state.host_waits_for(launch.clock)


_lock = threading.Lock()
_state: _State | None = None
_global_mode: _SanitizerMode | None = None


def _torchplug_device_types() -> frozenset[str]:
    return frozenset(_C.registered_backends())


def _start() -> _State:
    global _state
    if _state is None:
        _C.set_stream_trace_enabled(True)
        _state = _State(_torchplug_device_types())
    else:
        _state.device_types = _torchplug_device_types()
    return _state


def _stop_if_unused() -> None:
    global _state
    if _global_mode is None and not _active_here():
        _C.set_stream_trace_enabled(False)
        _state = None


def _active_here() -> bool:
    return any(isinstance(mode, _SanitizerMode) for mode in _get_current_dispatch_mode_stack())


def enable() -> None:
    """Turns the sanitizer on in this thread, and in autograd's backward passes
    it starts, until :func:`disable`. ``TORCHPLUG_SANITIZER=1`` calls this when the
    torchplug backends activate. Calling it again is harmless."""
    global _global_mode
    with _lock:
        state = _start()
        if _global_mode is None:
            _global_mode = _SanitizerMode(state)
            _global_mode.__enter__()
            _log.info("stream sanitizer on for %s", ", ".join(sorted(state.device_types)))


def disable() -> None:
    """Turns off what :func:`enable` turned on; the recorded stream order is dropped."""
    global _global_mode
    with _lock:
        if _global_mode is None:
            return
        stack = _get_current_dispatch_mode_stack()
        if not stack or stack[-1] is not _global_mode:
            raise RuntimeError(
                "torchplug.sanitizer.disable() must be called from the thread that enabled it, "
                "outside any dispatch mode entered after it."
            )
        _global_mode.__exit__(None, None, None)
        _global_mode = None
        _stop_if_unused()


def is_enabled() -> bool:
    """Whether operators run by this thread are checked."""
    return _active_here()


@contextmanager
def enabled() -> Iterator[None]:
    """Checks the operators run inside the block (nothing more if it is already on)."""
    if _active_here():
        yield
        return
    with _lock:
        mode = _SanitizerMode(_start())
    try:
        with mode:
            yield
    finally:
        with _lock:
            _stop_if_unused()
