"""What a plugin declares about its backend; the core does the rest."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchplug.device_kind import kind_of

# The entry-point group where a PrivateUse1 backend declares its device name, so
# that activation can choose the key's owner among every installed one.
PRIVATEUSE1_GROUP = "torchplug.privateuse1"


@dataclass(frozen=True)
class Backend:
    """A device backend built on torchplug.

    Args:
        name: the device name users type (``"foo"`` in ``torch.ones(2, device="foo")``).
        dispatch_key: ``"privateuse1"`` (renamed to ``name``) or ``"hpu"`` (the in-tree key).
        distribution: the distribution that ships the backend, for diagnostics.
        setup: optional callable run after the core registered the device, for
            the plugin's own extras (custom ops, module attributes). It receives
            the device module ``torch.<name>``. If it raises, a PrivateUse1
            backend keeps the key (torch accepts one PrivateUse1 name per
            process) and is reported as failed; what may fail belongs in ``prepare``.
        module: optional dotted name of the plugin's own module to fill in and
            register as ``torch.<name>`` (e.g. ``"vhabana_frameworks.torch.hpu"``);
            by default the core creates one.
        prepare: optional callable run before the backend takes its device, for
            what may fail on a given machine (loading native libraries, checking
            a driver). If it raises, the backend fails without taking
            PrivateUse1 from another installed backend that works; ``setup``
            runs after the device is taken, when giving it back is impossible.
        priority: for PrivateUse1 backends, which one gets the key when several
            are installed and ``TORCHPLUG_PRIVATEUSE1`` does not say: the highest
            priority wins, ties go to name order.
        driver: the device driver library (a path to a shared library that
            implements ``torchplug/driver.h``), or ``None`` for torchplug's
            simulator. A driver that cannot be loaded, speaks another major
            interface version, fails to initialise or lacks what the core needs
            fails the backend with that reason (``torchplug doctor``, first use
            of the device); ``import torch`` keeps working.
        driver_options: options for the driver's client, passed as they are to
            its ``client_create`` (the simulator takes ``"hidden_capabilities=<bits>"``,
            e.g. ``"hidden_capabilities=1"`` to serve a device whose memory the
            host cannot address). ``None`` passes none.
    """

    name: str
    dispatch_key: str = "privateuse1"
    distribution: str | None = None
    setup: Callable[[Any], None] | None = field(default=None, compare=False)
    module: str | None = None
    prepare: Callable[[], None] | None = field(default=None, compare=False)
    priority: int = 0
    driver: str | None = None
    driver_options: str | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"Backend name {self.name!r} must be a lower-case Python identifier.")
        fixed_name = kind_of(self.dispatch_key).fixed_name()
        if fixed_name is not None and self.name != fixed_name:
            raise ValueError(
                f"A backend on the in-tree {self.dispatch_key!r} key must be named {fixed_name!r}."
            )

    def autoload(self) -> BackendStatus:
        """Entry point body: activate this backend, never breaking ``import torch``.

        Idempotent and re-entrant: the ``torch.backends`` entry point, an explicit
        ``import`` of the plugin, threads and child processes all end in one
        registration.
        """
        return _activate(self)


class BackendState(enum.StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"
    LOST_PRIVATEUSE1 = "inactive"
    FAILED = "failed"
    # Another distribution provides the same device name and was activated first.
    SHADOWED = "shadowed"
    # Declared, waiting for the PrivateUse1 arbitration it takes part in.
    PENDING = "pending"


@dataclass
class BackendStatus:
    backend: Backend
    state: BackendState
    reason: str = ""
    load_ms: float = 0.0
    error: BaseException | None = None

    @property
    def active(self) -> bool:
        return self.state is BackendState.ACTIVE


def _activation_not_imported(backend: Backend) -> BackendStatus:
    raise RuntimeError(
        f"Cannot activate '{backend.name}': torchplug.activation is not imported "
        "(importing the torchplug package imports it)."
    )


# What autoload() calls: torchplug.activation installs itself here when it is
# imported, so that this declaration module, below activation, never imports it.
_activate: Callable[[Backend], BackendStatus] = _activation_not_imported
