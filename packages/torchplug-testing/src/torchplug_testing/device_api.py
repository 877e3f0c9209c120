"""What the suite uses of a backend's Python API, found the way any PyTorch device offers it.

Fixtures and helpers rely only on what every device has: ``torch.accelerator``
(when the device is the current accelerator), ``torch.Stream``/``torch.Event``
and ``torch.get_device_module(device)`` where the backend registered one. A
device-module function that a feature test needs is looked up through
:class:`DeviceModule` (the ``device_module`` fixture) or :func:`need`: when the
backend lacks it, that test fails with a message naming the function and the
group that needs it; no fixture errors, and no other group is affected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import torch

log = logging.getLogger(__name__)

# Devices whose torch.accelerator.synchronize failed once: not retried.
_no_accelerator_synchronize: set[str] = set()


def module_of(device: str) -> ModuleType | None:
    """``torch.<device>``, found the way torch finds it; None when the backend registered none."""
    try:
        return torch.get_device_module(device)
    except (RuntimeError, AttributeError):
        return None


def is_accelerator(device: str) -> bool:
    """Whether ``device`` is ``torch.accelerator``'s current accelerator in this process."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:
        return False
    try:
        current = accelerator.current_accelerator()
    except Exception:  # e.g. "Cannot have both HPU and cuda": torch cannot choose
        return False
    return current is not None and current.type == device


def is_available(device: str) -> bool | None:
    """Whether the device is usable: the device module's ``is_available()``, else
    ``torch.accelerator``'s; None when neither can tell."""
    function = getattr(module_of(device), "is_available", None)
    if function is not None:
        return bool(function())
    if is_accelerator(device):
        return bool(torch.accelerator.is_available())
    return None


def device_count(device: str) -> int | None:
    """How many devices of the type there are; None when neither ``torch.accelerator``
    nor the device module can tell."""
    if is_accelerator(device):
        return int(torch.accelerator.device_count())
    function = getattr(module_of(device), "device_count", None)
    return None if function is None else int(function())


def missing_message(device: str, name: str, group: str | None) -> str:
    """Why a test fails when ``torch.<device>.<name>`` does not exist."""
    who = f"the {group} group" if group else "this test"
    if module_of(device) is None:
        return (
            f"torch.{device} is missing (the backend registered no device module with "
            f"torch._register_device_module): {who} needs torch.{device}.{name}"
        )
    return f"torch.{device}.{name} is missing: {who} needs it"


def need(device: str, name: str, group: str | None = None) -> Any:
    """``torch.<device>.<name>``; fails the running test, naming it, when the backend lacks it."""
    value = getattr(module_of(device), name, None)
    if value is None:
        pytest.fail(missing_message(device, name, group), pytrace=False)
    return value


def current_device(device: str, group: str | None = None) -> int:
    """The index of the current device: ``torch.accelerator``'s, else the device module's."""
    if is_accelerator(device):
        return int(torch.accelerator.current_device_index())
    return int(need(device, "current_device", group)())


def synchronize(device: str) -> None:
    """Waits for the work queued on every device of the type ``device``, if it is available
    and the backend has a way to wait: ``torch.<device>.synchronize``, else
    ``torch.accelerator.synchronize``. With neither, it does nothing: draining between
    tests is a courtesy; the ``streams`` group is where synchronization is checked."""
    if not is_available(device):
        return
    indices = range(device_count(device) or 1)
    function: Callable[[int], None] | None = getattr(module_of(device), "synchronize", None)
    if function is not None:
        for index in indices:
            function(index)
        return
    if not is_accelerator(device) or device in _no_accelerator_synchronize:
        return
    try:
        for index in indices:
            torch.accelerator.synchronize(index)
    except RuntimeError as error:
        _no_accelerator_synchronize.add(device)
        log.warning(
            "torch.%s has no synchronize and torch.accelerator.synchronize failed (%s): "
            "queued work is not drained between tests",
            device,
            error,
        )


class DeviceModule:
    """``torch.<device>`` for a feature test: an attribute the backend lacks fails the
    test that reads it, naming the function and ``group``."""

    def __init__(self, device: str, group: str | None = None) -> None:
        self._device = device
        self._group = group
        self.__name__ = f"torch.{device}"

    @property
    def module(self) -> ModuleType | None:
        """The backend's own device module, None when it registered none."""
        return module_of(self._device)

    def provides(self, name: str) -> bool:
        return getattr(self.module, name, None) is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # introspection (copy, pickle, pytest): not a device function
            raise AttributeError(name)
        return need(self._device, name, self._group)

    def __repr__(self) -> str:
        return f"<device module {self.__name__} for {self._group or 'a test'}>"
