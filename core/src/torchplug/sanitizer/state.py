"""The stream-order model: vector clocks per stream and for the host, and the
accesses to each allocation checked against them."""

from __future__ import annotations

import threading

import torch

from torchplug import _C
from torchplug.sanitizer.accesses import (
    HOST,
    Access,
    CapturedAccess,
    Frames,
    Memory,
    StreamKey,
    TensorFacts,
)
from torchplug.sanitizer.operators import OpInfo
from torchplug.sanitizer.reports import freed_in_use_error, race_error


def join(into: dict[StreamKey, int], other: dict[StreamKey, int]) -> None:
    """Orders `into` after everything `other` has seen."""
    for stream, tick in other.items():
        if into.get(stream, 0) < tick:
            into[stream] = tick


class SanitizerState:
    """The stream-order model of one sanitized process."""

    def __init__(self, device_types: frozenset[str]) -> None:
        self.lock = threading.Lock()
        self.device_types = device_types
        self.infos: dict[torch._ops.OpOverload, OpInfo] = {}
        self.clocks: dict[StreamKey, dict[StreamKey, int]] = {}
        self.host: dict[StreamKey, int] = {}
        # Bumped whenever the host clock changes, so launches skip joining an unchanged one.
        self.host_version = 0
        self.joined_host: dict[StreamKey, int] = {}
        self.events: dict[tuple[str, int], dict[StreamKey, int]] = {}
        self.memory: dict[int, Memory] = {}
        # Host memory a device stream accesses (non-blocking copies): host ops on it are checked.
        self.host_memory: set[int] = set()
        # Graphs: the accesses a capturing stream's operators would make, by graph,
        # made at each replay instead of at the capture (which runs nothing).
        self.capturing: dict[StreamKey, int] = {}
        self.captured: dict[tuple[str, int], list[CapturedAccess]] = {}

    def info(self, func: torch._ops.OpOverload) -> OpInfo:
        info = self.infos.get(func)
        if info is None:
            info = self.infos[func] = OpInfo(func)
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
            join(clock, self.host)
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
        join(self.host, clock)
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
                    join(self.clock(stream), recorded)
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
            elif kind == "graph_capture_begin":
                self.capturing[stream] = handle
                self.captured[(device, handle)] = []
            elif kind == "graph_capture_end":
                self.capturing.pop(stream, None)
            elif kind == "graph_replay":
                self._replay(stream, self.captured.get((device, handle), []))
            elif kind == "graph_reset":
                self.captured.pop((device, handle), None)
            elif kind == "memory_record_stream":
                memory = self.memory.get(handle)
                if memory is not None:
                    memory.record_streams.add(stream)
            elif kind == "memory_free":
                memory = self.memory.pop(handle, None)
                if memory is not None:
                    self._check_free(memory, stream, where)

    def record_captured(self, stream: StreamKey, access: CapturedAccess) -> bool:
        """Keeps `access` for the replays when `stream` is capturing a graph."""
        graph = self.capturing.get(stream)
        if graph is None:
            return False
        self.captured[(stream[0], graph)].append(access)
        return True

    def _replay(self, stream: StreamKey, accesses: list[CapturedAccess]) -> None:
        """A replay on `stream`: one launch making every access its capture recorded."""
        clock, tick = self.launch(stream)
        for key, op, write, tensor, stack in accesses:
            self.access(key, stream, clock, tick, op, write, tensor, stack)

    def _check_free(self, memory: Memory, allocated_on: StreamKey, where: str) -> None:
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
            raise freed_in_use_error(access, allocated_on, where)

    def access(
        self,
        memory_key: int,
        stream: StreamKey,
        clock: dict[StreamKey, int],
        tick: int,
        op: str,
        write: bool,
        tensor: TensorFacts,
        stack: Frames,
    ) -> None:
        memory = self.memory.get(memory_key)
        if memory is None:
            memory = self.memory[memory_key] = Memory()
        earlier = [memory.write] if memory.write is not None else []
        if write:
            earlier += memory.reads.values()
        for previous in earlier:
            if previous.stream != stream and clock.get(previous.stream, 0) < previous.tick:
                raise race_error(previous, stream, op, "write" if write else "read", tensor, stack)
        current = Access(stream, tick, op, "write" if write else "read", tensor, stack)
        if write:
            memory.write = current
            memory.reads = {}
        else:
            memory.reads[stream] = current

    def forget(self, memory_key: int) -> None:
        self.memory.pop(memory_key, None)
        self.host_memory.discard(memory_key)
