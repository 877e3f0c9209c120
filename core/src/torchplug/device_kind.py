"""Every difference between a PrivateUse1 backend and an HPU backend, as table rows.

The Python side of ``kDeviceKinds`` in ``core/csrc/backend/backend_registry.cpp``:
code elsewhere asks a backend's :class:`DeviceKind` what to do instead of
testing the dispatch key's name, so a third kind of key would be one more row.
"""

from __future__ import annotations

from typing import NamedTuple


class DeviceKind(NamedTuple):
    """How torch exposes one dispatch key to an out-of-tree backend."""

    # The name a plugin gives as ``Backend(dispatch_key=...)``; also the C++ table's key.
    dispatch_key: str
    # The device name torch gives the key before any backend claims it.
    torch_name: str
    # The key is renamed to the backend's device name (``rename_privateuse1_backend``),
    # once per process: installed backends compete for it and torchplug arbitrates.
    renamed_to_backend: bool
    # Torch parses the device name by itself and imports ``torch.<name>`` when a
    # tensor is created there, whether or not a backend is active.
    known_to_torch: bool
    # ``torch.utils.generate_methods_for_privateuse1_backend`` gives tensors, modules
    # and storages their ``.<name>()`` methods; otherwise torchplug adds them.
    torch_generates_methods: bool
    # ``torch.manual_seed`` seeds the device's generators only through torchplug.
    seeded_by_torchplug: bool
    # The ``c10::DeviceType`` spelled in C++ code Inductor generates.
    aten_device_type: str
    # Registering the key makes it ``at::getAccelerator()`` ahead of CUDA, whose
    # backward then fails in the process (pytorch/pytorch#161129).
    accelerator_ahead_of_cuda: bool

    def fixed_name(self) -> str | None:
        """The only device name a backend on this key may have (None: any name)."""
        return None if self.renamed_to_backend else self.torch_name


# fmt: off
_ROWS = (
    # key          torch's name     renamed  known  methods  seeded  C++ device type     ahead of CUDA
    ("privateuse1", "privateuseone", True,    False, True,    False,  "at::kPrivateUse1", True),
    ("hpu",         "hpu",           False,   True,  False,   True,   "at::kHPU",         False),
)
# fmt: on
DEVICE_KINDS: dict[str, DeviceKind] = {row[0]: DeviceKind(*row) for row in _ROWS}
PRIVATEUSE1 = DEVICE_KINDS["privateuse1"]


def kind_of(dispatch_key: str) -> DeviceKind:
    """The row of a dispatch key, or a ValueError naming the keys there are."""
    try:
        return DEVICE_KINDS[dispatch_key]
    except KeyError:
        raise ValueError(
            f"dispatch_key {dispatch_key!r} is not supported; use one of {tuple(DEVICE_KINDS)}."
        ) from None


def kind_of_device(name: str) -> DeviceKind:
    """The row a device name belongs to: a key's fixed name, else a renamed PrivateUse1."""
    for kind in DEVICE_KINDS.values():
        if kind.fixed_name() == name:
            return kind
    return PRIVATEUSE1


def privateuse1_owner(torch_name_of_key: str) -> str | None:
    """The device name PrivateUse1 was renamed to, given torch's current name for the
    key (``torch._C._get_privateuse1_backend_name()``); None while it is unclaimed."""
    return None if torch_name_of_key == PRIVATEUSE1.torch_name else torch_name_of_key
