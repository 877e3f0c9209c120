"""A backend's known failures: the expectation file.

The file is TOML, kept in the backend's own repository. Each entry names a
suite test (or an OpInfo operator) and says why it fails::

    [[expected_failure]]
    test = "autograd::test_double_backward"   # group::test name, '*' matches anything
    reason = "double backward of the fused kernel is not implemented"

    [[expected_failure]]
    op = "linalg.eigh"          # OpInfo sweep: operator name (with variant: "max.reduction_with_dim")
    mode = "backward"           # optional: forward | backward (default: both)
    dtype = "float32"           # optional (default: every dtype swept)
    full_only = true            # optional: fails only on samples that only --full takes
    reason = "eigh backward is computed on the host with a different algorithm"

    [[expected_failure]]
    test = "moduleinfo_forward::test_forward[nn.Foo-float16]"   # a module of the ModuleInfo sweep
    full_only = true            # optional with test too
    reason = "..."

A matching test runs as a non-strict expected failure: it may fail without
failing the run, and if it passes it is reported as *newly passing* so the
entry can be removed.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from torchplug_testing import EXPECTATIONS_ENTRY_POINTS

FILE_NAME = "conformance.toml"
OPINFO_MODES = ("forward", "backward")


class ExpectationFileError(ValueError):
    """The expectation file is malformed; the message names the entry and the fix."""


@dataclass
class Expectation:
    pattern: str
    reason: str
    # Applies to --full runs only: the sampled run's samples pass.
    full_only: bool = False

    def __post_init__(self) -> None:
        parts = (re.escape(part) for part in self.pattern.split("*"))
        self._regex = re.compile(".*".join(parts))

    def matches(self, test_id: str) -> bool:
        return self._regex.fullmatch(test_id) is not None


@dataclass
class Expectations:
    source: str | None
    entries: list[Expectation]

    def applicable(self, full: bool) -> list[Expectation]:
        """The entries that apply to a run, sampled or ``--full``."""
        return [entry for entry in self.entries if full or not entry.full_only]

    def find(self, test_id: str, full: bool = False) -> Expectation | None:
        return next((entry for entry in self.applicable(full) if entry.matches(test_id)), None)


def opinfo_test_id(mode: str, op_id: str, dtype: str) -> str:
    """The suite's id of one OpInfo sweep test (one operator, mode and dtype)."""
    return f"opinfo_{mode}::test_{mode}[{op_id}-{dtype}]"


def parse(text: str, source: str) -> Expectations:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ExpectationFileError(f"{source} is not valid TOML: {error}") from error
    unknown_tables = set(document) - {"expected_failure"}
    if unknown_tables:
        raise ExpectationFileError(
            f"{source}: unknown top-level key(s) {', '.join(sorted(unknown_tables))}; "
            "list entries as [[expected_failure]] tables."
        )
    entries = []
    for number, raw in enumerate(document.get("expected_failure", []), start=1):
        where = f"{source}, expected_failure #{number}"
        reason = str(raw.get("reason", "")).strip()
        if not reason:
            raise ExpectationFileError(f'{where} has no reason; say why it fails (reason = "...").')
        unknown = set(raw) - {"test", "op", "mode", "dtype", "full_only", "reason"}
        if unknown:
            raise ExpectationFileError(
                f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                "use test, or op with optional mode, dtype and full_only, plus reason."
            )
        if ("test" in raw) == ("op" in raw):
            raise ExpectationFileError(f"{where} needs exactly one of 'test' or 'op'.")
        full_only = raw.get("full_only", False)
        if not isinstance(full_only, bool):
            raise ExpectationFileError(f"{where}: full_only is true or false.")
        if "test" in raw:
            if {"mode", "dtype"} & set(raw):
                raise ExpectationFileError(f"{where}: 'mode' and 'dtype' go with 'op', not 'test'.")
            entries.append(Expectation(str(raw["test"]), reason, full_only))
            continue
        mode = raw.get("mode")
        if mode is not None and mode not in OPINFO_MODES:
            raise ExpectationFileError(
                f"{where}: mode {mode!r} is not one of {', '.join(OPINFO_MODES)}."
            )
        entries.append(
            Expectation(
                opinfo_test_id(mode or "*", str(raw["op"]), str(raw.get("dtype", "*"))),
                reason,
                full_only,
            )
        )
    return Expectations(source, entries)


def load(path: str | Path) -> Expectations:
    path = Path(path)
    if not path.is_file():
        raise ExpectationFileError(
            f"Expectation file {path} does not exist; pass the path of the backend's "
            f"{FILE_NAME} (or omit the option to use the one the backend ships)."
        )
    return parse(path.read_text(), str(path))


def discover(device: str) -> Expectations:
    """The expectation file a backend ships, found through its entry point.

    A backend declares ``[project.entry-points."torchplug_testing.expectations"]
    <device> = "<package>"`` and ships ``<package>/conformance.toml``.
    """
    for entry_point in metadata.entry_points(group=EXPECTATIONS_ENTRY_POINTS):
        if entry_point.name == device:
            shipped = resources.files(entry_point.value) / FILE_NAME
            if not shipped.is_file():
                raise ExpectationFileError(
                    f"{entry_point.value} declares conformance expectations for '{device}' "
                    f"but ships no {FILE_NAME}; add it to the package data."
                )
            return parse(shipped.read_text(), f"{entry_point.value}/{FILE_NAME}")
    return Expectations(None, [])
