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
    ARGUMENTS,
    Capability,
    CopyKind,
    ErrorCode,
    TPD_Client_Create_Args,
    TPD_Client_Destroy_Args,
    TPD_DeviceProperties,
    TPD_HostFunction,
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
    def client_create_arguments(self) -> Any:
        """client_create's arguments: this check's backend name and options."""
        return new(
            TPD_Client_Create_Args,
            name=self.name.encode(),
            options=self.options.encode() if self.options else None,
        )

    def create_client(self) -> int:
        args = self.client_create_arguments()
        self.driver.call("client_create", byref(args))
        return _created("client_create", args, "client")

    def destroy_client(self, client: int | None) -> None:
        self.driver.call("client_destroy", byref(new(TPD_Client_Destroy_Args, client=client)))

    def arguments(self, member: str, **values: Any) -> Any:
        """The argument struct of table member ``member`` for this client, with ``values``."""
        return new(ARGUMENTS[member], client=self.client, **values)

    def call(self, member: str, **values: Any) -> Any:
        """Calls table member ``member`` for this client with ``values``; returns its arguments."""
        args = self.arguments(member, **values)
        self.driver.call(member, byref(args))
        return args

    def _finished(self, member: str, flag: str, **values: Any) -> bool:
        """The out ``flag`` of ``member`` (stream_query, event_query). The header has both an
        out flag and TPD_NOT_READY ("a query's work has not finished"), so a NOT_READY error
        counts as "not finished"."""
        try:
            return bool(getattr(self.call(member, **values), flag))
        except DriverError as error:
            if error.code is ErrorCode.NOT_READY:
                return False
            raise

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
        return self.call("client_device_count").device_count

    def properties(self, device: int = 0) -> Any:
        properties = new(TPD_DeviceProperties)
        self.call("device_get_properties", device=device, properties=pointer(properties))
        return properties

    def error_handle(self) -> int:
        """The address of a TPD_Error this caller owns: device_get_properties' of device -1."""
        properties = pointer(new(TPD_DeviceProperties))
        args = self.arguments("device_get_properties", device=-1, properties=properties)
        error = self.driver.api.device_get_properties(byref(args))
        ensure(bool(error), "device_get_properties of device -1 succeeded")
        return error

    def has(self, capability: Capability, device: int = 0) -> bool:
        return bool(self.properties(device).capabilities & capability)

    def require(self, capability: Capability, device: int = 0) -> None:
        if not self.has(capability, device):
            raise Skip(f"device {device} lacks the {capability.name} capability")

    # -------------------------------------------------------------- memory
    def allocate(self, size: int, device: int = 0) -> int | None:
        return self.call("memory_allocate", device=device, size=size).pointer

    def free(self, pointer: int | None) -> None:
        self.call("memory_free", pointer=pointer)

    def host_allocate(self, size: int) -> int | None:
        return self.call("host_memory_allocate", size=size).pointer

    def host_free(self, pointer: int | None) -> None:
        self.call("host_memory_free", pointer=pointer)

    def memset(self, stream: int | None, pointer: int | None, value: int, size: int) -> None:
        self.call("memory_set_async", stream=stream, pointer=pointer, value=value, size=size)

    def copy(
        self, stream: int | None, destination: Any, source: Any, size: int, kind: CopyKind
    ) -> None:
        """Copies ``size`` bytes; ``destination`` and ``source`` are addresses or ctypes buffers."""
        self.call(
            "memory_copy_async",
            stream=stream,
            destination=_address(destination),
            source=_address(source),
            size=size,
            kind=kind,
        )

    # ------------------------------------------------------------- streams
    def stream(self, device: int = 0, priority: int = 0) -> int:
        args = self.call("stream_create", device=device, priority=priority)
        return _created("stream_create", args, "stream")

    def destroy_stream(self, stream: int | None) -> None:
        self.call("stream_destroy", stream=stream)

    def synchronize(self, stream: int | None) -> None:
        self.call("stream_synchronize", stream=stream)

    def idle(self, stream: int | None) -> bool:
        return self._finished("stream_query", "idle", stream=stream)

    def wait_event(self, stream: int | None, event: int | None) -> None:
        self.call("stream_wait_event", stream=stream, event=event)

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
        self.call("stream_launch_host_function", stream=stream, function=callback, user_data=None)

    def gate(self, stream: int | None, timeout: float = 10.0) -> threading.Event:
        """Blocks ``stream`` in a host function until the returned event is set (or ``timeout``)."""
        opened = threading.Event()
        self.gates.append(opened)
        self.host_function(stream, lambda: None if opened.wait(timeout) else "gate timed out")
        return opened

    # -------------------------------------------------------------- events
    def event(self, device: int = 0, timing: bool = False) -> int:
        args = self.call("event_create", device=device, enable_timing=int(timing))
        return _created("event_create", args, "event")

    def destroy_event(self, event: int | None) -> None:
        self.call("event_destroy", event=event)

    def record(self, event: int | None, stream: int | None) -> None:
        self.call("event_record", event=event, stream=stream)

    def completed(self, event: int | None) -> bool:
        return self._finished("event_query", "completed", event=event)

    def event_synchronize(self, event: int | None) -> None:
        self.call("event_synchronize", event=event)


def _created(member: str, args: Any, handle: str) -> int:
    """The out ``handle`` of a successful ``member``, which must not be NULL."""
    created = getattr(args, handle)
    ensure(bool(created), f"{member} succeeded but returned a NULL {handle}")
    return created


def _address(value: Any) -> int | None:
    """The address of ``value``: an address already (or None), or a ctypes buffer."""
    if value is None or isinstance(value, int):
        return value
    return addressof(value)
