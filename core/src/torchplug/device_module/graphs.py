"""Graph capture and replay, and private memory pools: ``torch.cuda``'s
``CUDAGraph``, ``graph``, ``graph_pool_handle``, ``MemPool`` and
``use_mem_pool`` with the device's name. ``torch.accelerator.Graph`` creates
the same graphs when the device is the accelerator."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import torch

from torchplug.device_module import allocators
from torchplug.device_module._device import BoundDevice
from torchplug.device_module.allocators import PluggableAllocator

PoolId = tuple[int, int]


def functions(bound: BoundDevice, parts: dict[str, Any]) -> dict[str, Any]:
    """The graphs-and-pools part of ``torch.<name>``; ``parts`` holds the
    stream and memory functions it uses."""
    name = bound.name
    key = bound.key
    current_stream: Callable[..., torch.Stream] = parts["current_stream"]

    class Graph:
        """A captured sequence of the device's work, replayed at will
        (``torch.cuda.CUDAGraph``). Capture runs nothing: the work queued on the
        capturing stream is recorded, and ``replay()`` queues it again over the
        same memory. Allocations during capture come from the graph's private
        pool, which stays reserved for the replays until ``reset()``.
        """

        def __init__(self, keep_graph: bool = False) -> None:
            self._graph = bound.native()._Graph(key, keep_graph)

        def capture_begin(
            self, pool: PoolId | None = None, capture_error_mode: str = "global"
        ) -> None:
            """Begins capturing the current stream (not the default stream).
            ``pool`` shares another graph's pool (``graph.pool()`` or
            ``graph_pool_handle()``)."""
            self._graph.capture_begin(pool, capture_error_mode)

        def capture_end(self) -> None:
            self._graph.capture_end()

        def instantiate(self) -> None:
            self._graph.instantiate()

        def replay(self) -> None:
            """Queues the captured work on the current stream."""
            self._graph.replay()

        def reset(self) -> None:
            """Forgets the capture (after the replays queued have run) and
            releases the graph's pool."""
            self._graph.reset()

        def pool(self) -> PoolId:
            return self._graph.pool()

        def enable_debug_mode(self) -> None:
            self._graph.enable_debug_mode()

        def debug_dump(self, debug_path: str) -> None:
            self._graph.debug_dump(debug_path)

    class graph:  # torch.cuda.graph's spelling
        """Captures the block into ``cuda_graph`` (a ``Graph``), as
        ``torch.cuda.graph``: on a side stream (``stream``, else one shared by
        every capture), after synchronizing the device and emptying the cache.
        An exception in the block abandons the capture."""

        default_capture_stream: torch.Stream | None = None

        def __init__(
            self,
            cuda_graph: Graph,
            pool: PoolId | None = None,
            stream: torch.Stream | None = None,
            capture_error_mode: str = "global",
        ) -> None:
            if stream is None:
                if graph.default_capture_stream is None:
                    graph.default_capture_stream = parts["Stream"]()
                stream = graph.default_capture_stream
            self.cuda_graph = cuda_graph
            self.pool = pool
            self.capture_error_mode = capture_error_mode
            self.stream_context = parts["stream"](stream)

        def __enter__(self) -> None:
            parts["synchronize"]()
            gc.collect()
            parts["empty_cache"]()
            self.stream_context.__enter__()
            try:
                self.cuda_graph.capture_begin(self.pool, self.capture_error_mode)
            except BaseException:
                self.stream_context.__exit__(None, None, None)
                raise

        def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
            try:
                if kind is None:
                    self.cuda_graph.capture_end()
                else:
                    self.cuda_graph.reset()
            finally:
                self.stream_context.__exit__(kind, *rest)

    def graph_pool_handle() -> PoolId:
        """A new pool id, to share one pool between several graphs' captures."""
        return bound.native().graph_pool_handle()

    def is_current_stream_capturing() -> bool:
        """Whether the current stream of the current device is capturing a graph."""
        stream = current_stream()
        return bound.native().is_stream_capturing(key, stream.device_index, stream.stream_id)

    class MemPool:
        """A private memory pool of the current device (``torch.cuda.MemPool``):
        what is allocated inside ``use_mem_pool(pool)`` comes from it, and its
        free memory serves only those allocations while the pool lives. With
        ``allocator``, its memory comes from that pluggable allocator and goes
        back to it when the pool and its tensors are gone."""

        def __init__(self, allocator: PluggableAllocator | None = None) -> None:
            native = bound.native()
            self._device = bound.current_device()
            self._id: PoolId = native.graph_pool_handle()
            self._allocator = None if allocator is None else allocators.checked(allocator, name)
            native.retain_pool(key, self._device, self._id)
            if self._allocator is not None:
                try:
                    native.set_pool_allocator(
                        key, self._device, self._id, *self._allocator.serve(bound)
                    )
                except BaseException:
                    native.release_pool(key, self._device, self._id)
                    raise

        @property
        def id(self) -> PoolId:
            return self._id

        @property
        def allocator(self) -> PluggableAllocator | None:
            """The pluggable allocator the pool's memory comes from, or None
            for the device's own memory."""
            return self._allocator

        def __del__(self) -> None:
            # At interpreter shutdown the core may be gone already.
            with suppress(Exception):
                bound.native().release_pool(key, self._device, self._id)

    @contextmanager
    def use_mem_pool(pool: MemPool, device: Any = None) -> Iterator[None]:
        """Allocations of this thread on ``device`` come from ``pool`` within the block."""
        index = bound.index(device)
        native = bound.native()
        native.begin_allocate_to_pool(key, index, pool.id)
        try:
            yield
        finally:
            native.end_allocate_to_pool(key, index, pool.id)
            native.release_pool(key, index, pool.id)  # the use begin_allocate_to_pool counted

    return {
        "Graph": Graph,
        "graph": graph,
        "graph_pool_handle": graph_pool_handle,
        "is_current_stream_capturing": is_current_stream_capturing,
        "MemPool": MemPool,
        "use_mem_pool": use_mem_pool,
    }
