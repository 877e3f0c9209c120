"""Opening a driver library: its function table, extensions, and errors as exceptions."""

from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_size_t, c_void_p
from typing import Any

from torchplug_testing.driver.bindings import (
    API_MAJOR,
    API_MEMBERS,
    API_MINOR,
    ENTRY_POINT,
    EXTENSIONS,
    STRUCT_SIZES,
    ErrorCode,
    ExtensionType,
    TPD_Api,
    TPD_ApiVersion,
    TPD_Error_Destroy_Args,
    TPD_Error_GetCode_Args,
    TPD_Error_Message_Args,
    TPD_ExtensionBase,
    new,
)


class DriverLoadError(Exception):
    """The library cannot be used as a driver: not loadable, no entry point, wrong version."""


class DriverError(Exception):
    """A TPD_Error returned by ``function``: its code and message (the error is destroyed)."""

    def __init__(self, function: str, code: ErrorCode, message: str):
        super().__init__(f"{function}: {code.name}: {message}")
        self.function = function
        self.code = code
        self.message = message


class Driver:
    """A loaded driver: its table (``api``), extensions by type, and calls that raise DriverError."""

    def __init__(self, path: str, library: ctypes.CDLL, api: Any, extensions: dict[int, Any]):
        self.path = path
        # The table lives in the library's memory: the library stays loaded while the table is used.
        self.library = library
        self.api = api
        self.extensions = extensions
        self.version = (api.api_version.major, api.api_version.minor)
        self.name = (api.driver_name or b"").decode(errors="replace")
        self.driver_version = (api.driver_version or b"").decode(errors="replace")

    def call(self, member: str, args: Any) -> None:
        """Calls table member ``member`` with ``args`` (a struct or a pointer to one)."""
        self._call(self.api, member, args)

    def call_extension(self, kind: ExtensionType, member: str, args: Any) -> None:
        self._call(self.extensions[kind], member, args)

    def _call(self, table: Any, member: str, args: Any) -> None:
        function = getattr(table, member)
        if not function:
            # ctypes would call address 0.
            raise NotImplementedError(f"the driver's {member} is NULL")
        self._check(member, function(args))

    def _check(self, function: str, error: int | None) -> None:
        if error:
            raise self.take_error(function, error)

    def take_error(self, function: str, error: int) -> DriverError:
        """The DriverError of the TPD_Error at address ``error``, which is destroyed."""
        code_args = new(TPD_Error_GetCode_Args, error=error)
        failure = self.api.error_get_code(byref(code_args))
        message_args = new(TPD_Error_Message_Args, error=error)
        self.api.error_message(byref(message_args))
        message = ""
        if message_args.message:
            raw = ctypes.string_at(message_args.message, message_args.message_size)
            message = raw.decode(errors="replace")
        self.api.error_destroy(byref(new(TPD_Error_Destroy_Args, error=error)))
        if failure:
            # Reading the code failed: that error is the driver's defect, reported instead.
            inner = self.take_error("error_get_code", failure)
            return DriverError(function, ErrorCode.INTERNAL, f"{message} (code unknown: {inner})")
        try:
            code = ErrorCode(code_args.code)
        except ValueError:
            return DriverError(
                function, ErrorCode.INTERNAL, f"{message} (unknown error code {code_args.code})"
            )
        return DriverError(function, code, message)


def load(path: str | os.PathLike[str]) -> Driver:
    """Opens the driver library at ``path``: checks its API version and table, walks its
    extensions. Raises DriverLoadError if it is not a usable API 1.x driver."""
    path = os.fspath(path)
    try:
        library = ctypes.CDLL(path)
    except OSError as error:
        raise DriverLoadError(f"cannot load the driver library {path}: {error}") from error
    try:
        get_api = library[ENTRY_POINT]
    except AttributeError:
        raise DriverLoadError(
            f"{path} is not a torchplug driver: it does not export {ENTRY_POINT}"
        ) from None
    get_api.restype = c_void_p
    get_api.argtypes = []
    address = get_api()
    if not address:
        raise DriverLoadError(f"{ENTRY_POINT} of {path} returned NULL")
    # Only the members the table's struct_size covers may be read.
    size = c_size_t.from_address(address).value
    version_end = TPD_Api.api_version.offset + ctypes.sizeof(TPD_ApiVersion)
    if size < version_end:
        raise DriverLoadError(
            f"the table of {path} has struct_size {size}: too small to hold api_version"
        )
    version = TPD_ApiVersion.from_address(address + TPD_Api.api_version.offset)
    if version.major != API_MAJOR:
        raise DriverLoadError(
            f"{path} implements driver API {version.major}.{version.minor}, but these bindings "
            f"implement API {API_MAJOR}.{API_MINOR}: the major versions must be equal"
        )
    if size < STRUCT_SIZES[TPD_Api]:
        raise DriverLoadError(
            f"the table of {path} has struct_size {size}, less than the "
            f"TPD_Api_STRUCT_SIZE {STRUCT_SIZES[TPD_Api]} of API {API_MAJOR}.0"
        )
    api = TPD_Api.from_address(address)
    missing = [name for name, _, _ in API_MEMBERS if not getattr(api, name)]
    if any(name.startswith("error_") for name in missing):
        # Without these no error can be read, so no check can report one.
        raise DriverLoadError(f"the table of {path} lacks {', '.join(missing)}")
    return Driver(path, library, api, _extensions(path, api.extension_start))


def _extensions(path: str, address: int | None) -> dict[int, Any]:
    """The extension chain by type: a known type as its struct when its struct_size covers
    all members, otherwise (a type from a newer header, or too small) as TPD_ExtensionBase."""
    found: dict[int, Any] = {}
    visited: set[int] = set()
    while address:
        if address in visited:
            raise DriverLoadError(f"the extension chain of {path} loops")
        visited.add(address)
        base = TPD_ExtensionBase.from_address(address)
        known = EXTENSIONS.get(base.type)  # type: ignore[call-overload]
        extension: Any = base
        if known is not None and base.struct_size >= STRUCT_SIZES[known[0]]:
            extension = known[0].from_address(address)
        # The first of two extensions of one type wins, as in a search of the chain.
        found.setdefault(base.type, extension)
        address = base.next
    return found
