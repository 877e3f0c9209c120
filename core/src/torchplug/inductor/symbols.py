"""A torch symbol the Inductor integration replaces or relies on, and how to
tell whether the installed torch still has the one it was verified against.

A symbol's fingerprint is taken the same way in every torch release:

- ``Check.SOURCE``: a hash of its source (and of the functions in
  ``depends_on``), without comment lines and blank lines, for a function the
  replacement re-implements in part or whose behaviour it relies on;
- ``Check.SIGNATURE``: its parameter names, for a function that is only
  called, overridden or wrapped with the same arguments.

``verified`` maps each torch release the symbol was checked against to its
fingerprint there; the symbol is verified when the installed torch's
fingerprint is one of them, whatever the version number says.
"""

from __future__ import annotations

import enum
import hashlib
import importlib
import inspect
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Devices = Callable[[], tuple[str, ...]]
# Given the torch function and the enabled torchplug devices, what replaces it.
Replace = Callable[[Callable[..., Any], Devices], Callable[..., Any]]


class Check(enum.Enum):
    SOURCE = "source"
    SIGNATURE = "signature"


@dataclass(frozen=True)
class TorchInternal:
    module: str
    name: str
    why: str
    check: Check
    verified: dict[str, str]
    replace: Replace | None = None
    also_bound_in: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()

    @property
    def symbol(self) -> str:
        return f"{self.module}.{self.name}"

    def resolve(self) -> Any:
        return resolve(self.module, self.name)

    def fingerprint(self) -> str:
        if self.check is Check.SIGNATURE:
            return signature_fingerprint(inspect.signature(self.resolve()).parameters)
        functions = [self.resolve(), *(resolve(self.module, name) for name in self.depends_on)]
        return source_fingerprint(inspect.getsource(function) for function in functions)

    def problem(self) -> str | None:
        """Why the installed torch's symbol is not the verified one, or None."""
        try:
            found = self.fingerprint()
            original = self.resolve()
        except (ImportError, AttributeError) as error:
            return f"{self.symbol} is missing ({error})"
        except (OSError, TypeError, ValueError) as error:
            return f"{self.symbol} cannot be read ({error})"
        if found not in self.verified.values():
            return f"{self.symbol} differs from torch {' and '.join(self.verified)}'s"
        attribute = self.name.rpartition(".")[2]
        for module in self.also_bound_in:
            if getattr(importlib.import_module(module), attribute, None) is not original:
                return f"{module}.{attribute} is no longer {self.symbol}"
        return None

    def install(self, devices: Devices) -> None:
        """Put the replacement where the torch function was (and where it was imported)."""
        if self.replace is None:
            raise TypeError(f"{self.symbol} is relied on, not replaced")
        replacement = self.replace(self.resolve(), devices)
        owner, _, attribute = self.name.rpartition(".")
        setattr(resolve(self.module, owner), attribute, replacement)
        for module in self.also_bound_in:
            setattr(importlib.import_module(module), attribute, replacement)


def source_fingerprint(sources: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for source in sources:
        lines = textwrap.dedent(source).splitlines()
        kept = [
            line.rstrip() for line in lines if line.strip() and not line.strip().startswith("#")
        ]
        digest.update("\n".join(kept).encode())
    return digest.hexdigest()[:12]


def signature_fingerprint(parameter_names: Iterable[str]) -> str:
    return f"({', '.join(parameter_names)})"


def resolve(module: str, name: str) -> Any:
    value: Any = importlib.import_module(module)
    for part in filter(None, name.split(".")):
        value = getattr(value, part)
    return value
