"""What a conformance check is given: the driver, a fresh client, and short-hands for calls.

A check is a function ``check(ctx) -> str | None`` registered with ``@check``:
it passes by returning (optionally a note), fails by raising (CheckFailure, an
unexpected DriverError, anything else), and skips by raising Skip.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from ctypes import addressof, byref, memmove, pointer
from dataclasses import dataclass
from typing import Any

from torchplug_testing.driver.bindings import (
    Capability,
    CopyKind,
    ErrorCode,
    TPD_Client_Create_Args,
    TPD_Client_Destroy_Args,
    TPD_Client_DeviceCount_Args,
    TPD_Device_GetProperties_Args,
    TPD_DeviceProperties,
    TPD_Event_Create_Args,
    TPD_Event_Query_Args,
    TPD_Event_Record_Args,
    TPD_HostFunction,
    TPD_HostMemory_Allocate_Args,
    TPD_HostMemory_Free_Args,
    TPD_Memory_Allocate_Args,
    TPD_Memory_CopyAsync_Args,
    TPD_Memory_Free_Args,
    TPD_Memory_SetAsync_Args,
    TPD_Stream_Create_Args,
    TPD_Stream_Destroy_Args,
    TPD_Stream_LaunchHostFunction_Args,
    TPD_Stream_Query_Args,
    TPD_Stream_WaitEvent_Args,
    new,
)
from torchplug_testing.driver.loader import Driver, DriverError

# Host functions handed to the driver. They are never released: a check that
# fails may leave one queued, and the driver may call it until the process ends.
_KEEP_ALIVE: list[Any] = []


def keep_alive(value: Any) -> None:
    """Keeps ``value`` (a callback or buffer the driver may still use) until the process ends."""
    _KEEP_ALIVE.append(value)


class Skip(Exception):
    """The check does not apply to this driver (a capability or extension is missing)."""


class CheckFailure(Exception):
    """The driver broke the interface's contract."""


def ensure(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailure(message)


@dataclass(frozen=True)
class Check:
    name: str
    function: Callable[[Context], str | None]
    description: str


CHECKS: dict[str, Check] = {}


def check(function: Callable[[Context], str | None]) -> Callable[[Context], str | None]:
    """Registers ``function`` as the check named after it (without ``check_``)."""
    name = function.__name__.removeprefix("check_")
    description = " ".join((function.__doc__ or "").split("\n\n")[0].split())
    CHECKS[name] = Check(name, function, description)
    return function


class Context:
    """One check's view of the driver: ``client`` is created for it and destroyed after it."""

    def __init__(self, driver: Driver, name: str, options: str | None):
        self.driver = driver
        self.name = name
        self.options = options
        self.client: int | None = self.create_client()
        # Exceptions raised inside host functions: a host function runs on a driver
        # thread, where an exception would only be printed.
        self.callback_errors: list[str] = []
        self.gates: list[threading.Event] = []

    def close(self) -> None:
        """Opens the gates a failed check left shut, then destroys the client (if any)."""
        for gate in self.gates:
            gate.set()
        if self.client is not None:
            self.destroy_client(self.client)

    # ------------------------------------------------------------- clients
    def create_client(self) -> int:
        args = new(
            TPD_Client_Create_Args,
            name=self.name.encode(),
            options=self.options.encode() if self.options else None,
        )
        self.driver.call("client_create", byref(args))
        ensure(bool(args.client), "client_create succeeded but returned a NULL client")
        return args.client

    def destroy_client(self, client: int | None) -> None:
        self.driver.call("client_destroy", byref(new(TPD_Client_Destroy_Args, client=client)))

    def call(self, member: str, struct: type, **values: Any) -> Any:
        """Calls ``member`` with a ``struct`` of ``values`` for this client; returns the struct."""
        args = new(struct, client=self.client, **values)
        self.driver.call(member, byref(args))
        return args

    def expect(
        self,
        codes: ErrorCode | Iterable[ErrorCode],
        call: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> DriverError:
        """Calls ``call``; it must raise a DriverError of one of ``codes``, which is returned."""
        wanted = {codes} if isinstance(codes, ErrorCode) else set(codes)
        names = " or ".join(sorted(code.name for code in wanted))
        try:
            call(*args, **kwargs)
        except DriverError as error:
            ensure(error.code in wanted, f"expected {names}, got {error}")
            ensure(
                bool(error.message),
                f"{error.function} returned {error.code.name} without a message",
            )
            return error
        name = getattr(call, "__name__", repr(call))
        arguments = ", ".join(hex(a) if isinstance(a, int) and a > 4096 else repr(a) for a in args)
        called = "" if name == "<lambda>" else f"{name}({arguments}): "
        raise CheckFailure(f"{called}expected {names}, got success")

    # ------------------------------------------------------------- devices
    @property
    def device_count(self) -> int:
        return self.call("client_device_count", TPD_Client_DeviceCount_Args).device_count

    def properties(self, device: int = 0) -> Any:
        properties = new(TPD_DeviceProperties)
        self.call(
            "device_get_properties",
            TPD_Device_GetProperties_Args,
            device=device,
            properties=pointer(properties),
        )
        return properties

    def has(self, capability: Capability, device: int = 0) -> bool:
        return bool(self.properties(device).capabilities & capability)

    def require(self, capability: Capability, device: int = 0) -> None:
        if not self.has(capability, device):
            raise Skip(f"device {device} lacks the {capability.name} capability")

    # -------------------------------------------------------------- memory
    def allocate(self, size: int, device: int = 0) -> int | None:
        return self.call(
            "memory_allocate", TPD_Memory_Allocate_Args, device=device, size=size
        ).pointer

    def free(self, pointer: int | None) -> None:
        self.call("memory_free", TPD_Memory_Free_Args, pointer=pointer)

    def host_allocate(self, size: int) -> int | None:
        return self.call("host_memory_allocate", TPD_HostMemory_Allocate_Args, size=size).pointer

    def host_free(self, pointer: int | None) -> None:
        self.call("host_memory_free", TPD_HostMemory_Free_Args, pointer=pointer)

    def memset(self, stream: int | None, pointer: int | None, value: int, size: int) -> None:
        self.call(
            "memory_set_async",
            TPD_Memory_SetAsync_Args,
            stream=stream,
            pointer=pointer,
            value=value,
            size=size,
        )

    def copy(
        self, stream: int | None, destination: Any, source: Any, size: int, kind: CopyKind
    ) -> None:
        """Copies ``size`` bytes; ``destination`` and ``source`` are addresses or ctypes buffers."""
        self.call(
            "memory_copy_async",
            TPD_Memory_CopyAsync_Args,
            stream=stream,
            destination=_address(destination),
            source=_address(source),
            size=size,
            kind=kind,
        )

    # ------------------------------------------------------------- streams
    def stream(self, device: int = 0, priority: int = 0) -> int:
        stream = self.call(
            "stream_create", TPD_Stream_Create_Args, device=device, priority=priority
        ).stream
        ensure(bool(stream), "stream_create succeeded but returned a NULL stream")
        return stream

    def destroy_stream(self, stream: int | None) -> None:
        self.call("stream_destroy", TPD_Stream_Destroy_Args, stream=stream)

    def synchronize(self, stream: int | None) -> None:
        self.call("stream_synchronize", TPD_Stream_Query_Args, stream=stream)

    def idle(self, stream: int | None) -> bool:
        """stream_query's answer; a NOT_READY error counts as "busy" (see ``completed``)."""
        try:
            return bool(self.call("stream_query", TPD_Stream_Query_Args, stream=stream).idle)
        except DriverError as error:
            if error.code is ErrorCode.NOT_READY:
                return False
            raise

    def wait_event(self, stream: int | None, event: int | None) -> None:
        self.call("stream_wait_event", TPD_Stream_WaitEvent_Args, stream=stream, event=event)

    def host_function(self, stream: int | None, function: Callable[[], str | None]) -> None:
        """Queues ``function`` on ``stream``: it fails the stream when it returns a message."""

        def run(user_data: int | None, message: int | None, message_size: int) -> int:
            try:
                failure = function()
            except Exception as error:
                self.callback_errors.append(f"{type(error).__name__}: {error}")
                failure = f"exception in a conformance host function: {error}"
            if failure is None:
                return 0
            if message and message_size:
                text = failure.encode()[: message_size - 1] + b"\0"
                memmove(message, text, len(text))
            return 1

        callback = TPD_HostFunction(run)
        keep_alive(callback)
        self.call(
            "stream_launch_host_function",
            TPD_Stream_LaunchHostFunction_Args,
            stream=stream,
            function=callback,
            user_data=None,
        )

    def gate(self, stream: int | None, timeout: float = 10.0) -> threading.Event:
        """Blocks ``stream`` in a host function until the returned event is set (or ``timeout``)."""
        opened = threading.Event()
        self.gates.append(opened)
        self.host_function(stream, lambda: None if opened.wait(timeout) else "gate timed out")
        return opened

    # -------------------------------------------------------------- events
    def event(self, device: int = 0, timing: bool = False) -> int:
        event = self.call(
            "event_create", TPD_Event_Create_Args, device=device, enable_timing=int(timing)
        ).event
        ensure(bool(event), "event_create succeeded but returned a NULL event")
        return event

    def destroy_event(self, event: int | None) -> None:
        self.call("event_destroy", TPD_Event_Query_Args, event=event)

    def record(self, event: int | None, stream: int | None) -> None:
        self.call("event_record", TPD_Event_Record_Args, event=event, stream=stream)

    def completed(self, event: int | None) -> bool:
        """event_query's answer. The header has both an out flag and TPD_NOT_READY ("a
        query's work has not finished"), so a NOT_READY error counts as "not completed"."""
        try:
            return bool(self.call("event_query", TPD_Event_Query_Args, event=event).completed)
        except DriverError as error:
            if error.code is ErrorCode.NOT_READY:
                return False
            raise

    def event_synchronize(self, event: int | None) -> None:
        self.call("event_synchronize", TPD_Event_Query_Args, event=event)


def _address(value: Any) -> int | None:
    """The address of ``value``: an address already (or None), or a ctypes buffer."""
    if value is None or isinstance(value, int):
        return value
    return addressof(value)
