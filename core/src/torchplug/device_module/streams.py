"""Streams, events and host-device synchronization checks (``torch.cuda``'s
``streams`` and stream functions). ``torch.Stream`` and ``torch.Event`` work
through the core's device guard; these are the per-device spellings."""

from __future__ import annotations

from typing import Any

import torch

from torchplug.device_module._device import BoundDevice

# torch.cuda.set_sync_debug_mode's names, in the order of their numbers.
SYNC_DEBUG_MODES = ("default", "warn", "error")


def functions(bound: BoundDevice) -> dict[str, Any]:
    """The streams-and-events part of ``torch.<name>``, by attribute name."""
    name = bound.name
    key = bound.key

    def current_stream(device: Any = None) -> torch.Stream:
        index = bound.index(device)
        native = bound.native()
        return torch.Stream(
            stream_id=native.current_stream_id(key, index),
            device_index=index,
            device_type=native.device_type_id(key),
        )

    def default_stream(device: Any = None) -> torch.Stream:
        index = bound.index(device)
        return torch.Stream(
            stream_id=0, device_index=index, device_type=bound.native().device_type_id(key)
        )

    def set_stream(stream: torch.Stream) -> None:
        """Makes ``stream`` current, and its device the current device, as
        ``torch.cuda.set_stream`` does."""
        bound.set_device(bound.index(stream.device_index))
        bound.native().set_current_stream(key, stream.device_index, stream.stream_id)

    class StreamContext:
        """Makes ``stream`` and its device current for the block (``None``: no
        change), as ``torch.cuda.StreamContext``: on exit the current stream of
        both devices and the current device are restored."""

        def __init__(self, stream: torch.Stream | None) -> None:
            self.stream = stream
            self.previous: list[torch.Stream] = []

        def __enter__(self) -> None:
            if self.stream is None:
                return
            # Restored in reverse: the stream's device first, the original device last.
            self.previous = [current_stream()]
            if self.stream.device_index != self.previous[0].device_index:
                self.previous.insert(0, current_stream(self.stream.device_index))
            set_stream(self.stream)

        def __exit__(self, *exc: object) -> None:
            for previous in self.previous:
                set_stream(previous)
            self.previous = []

    def stream(stream: torch.Stream | None) -> StreamContext:
        return StreamContext(stream)

    def set_sync_debug_mode(debug_mode: int | str) -> None:
        """Warns (1, "warn") or raises (2, "error") when an operation makes the host
        wait for the device: blocking copies to or from the host, ``item()``.
        0 or "default" turns the checks off."""
        if isinstance(debug_mode, str):
            if debug_mode not in SYNC_DEBUG_MODES:
                raise RuntimeError(
                    f"invalid value of debug_mode {debug_mode!r}, expected one of "
                    f"{', '.join(SYNC_DEBUG_MODES)} (or 0, 1, 2)"
                )
            debug_mode = SYNC_DEBUG_MODES.index(debug_mode)
        bound.native().set_sync_debug_mode(key, int(debug_mode))

    def get_sync_debug_mode() -> int:
        return bound.native().sync_debug_mode(key)

    def Stream(device: Any = None, priority: int = 0) -> torch.Stream:
        target = torch.device(name, bound.index(device))
        try:
            return torch.Stream(device=target, priority=priority)
        except RuntimeError as error:
            # torch.Stream(device=...) asks for the accelerator first, which a torch
            # built with CUDA refuses while hpu is registered and no PrivateUse1 leads.
            if "Cannot have both" not in str(error):
                raise
            raise RuntimeError(
                f"torch.{name}.Stream() cannot create a new stream in this process: "
                f"torch.Stream(device=...) asks torch for the accelerator first, and this "
                f"torch refuses '{name}' as the accelerator ({error}). The current and default "
                f"streams work: torch.{name}.current_stream(), torch.{name}.default_stream(), "
                f"torch.Event(device='{name}')."
            ) from error

    def Event(
        enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        """An event on the current device, as ``torch.cuda.Event``.

        ``blocking`` asks that a host waiting on the event block rather than
        spin; on these devices every host wait (``synchronize()``, ``wait()``
        from the host) already sleeps until the device is done, whatever its
        value. Events cannot be shared between processes: ``interprocess=True``
        raises ``NotImplementedError``.
        """
        if interprocess:
            raise NotImplementedError(
                f"torch.{name}.Event(interprocess=True): {name} events cannot be shared between "
                f"processes. torchplug.ipc shares {name} tensors through torch.multiprocessing, "
                "not events: synchronize before sending a tensor, or signal through the queue."
            )
        return torch.Event(
            device=torch.device(name, bound.current_device()), enable_timing=enable_timing
        )

    def _sleep(milliseconds: float) -> None:
        """Queues a simulated kernel of the given duration on the current stream."""
        native = bound.native()
        index = bound.current_device()
        native.sleep_on_stream(
            name, index, native.current_stream_id(key, index), float(milliseconds)
        )

    return {
        "current_stream": current_stream,
        "default_stream": default_stream,
        "set_stream": set_stream,
        "stream": stream,
        "StreamContext": StreamContext,
        "set_sync_debug_mode": set_sync_debug_mode,
        "get_sync_debug_mode": get_sync_debug_mode,
        "Stream": Stream,
        "Event": Event,
        "_sleep": _sleep,
    }
