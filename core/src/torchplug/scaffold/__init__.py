"""``torchplug new NAME``: a new out-of-tree backend project, ready to build, test and ship.

The project (templates/ here) holds a Backend declaration on PrivateUse1, one
C++ operator built with torchplug's CMake package, the known conformance
failures every torchplug device shares, tests and a README. With ``--driver``
it also holds a device driver (templates/driver/: a C library implementing
``torchplug/driver.h``) that the Backend names. It requires the torch
releases the running torchplug supports (its kernel is built once, on torch's
stable ABI) and the running torchplug's release line.
"""

from __future__ import annotations

import argparse
import keyword
import logging
import re
import sys
from collections.abc import Iterator
from importlib import metadata, resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

log = logging.getLogger("torchplug")

TEMPLATE_SUFFIX = ".tmpl"
# Files whose template name differs from the name in the project.
RENAMED = {"gitignore": ".gitignore"}
# The driver's templates, written only with --driver.
DRIVER_FOLDER = "driver/"


def register(subparsers: argparse._SubParsersAction) -> None:
    """The ``torchplug.commands`` entry point: adds ``torchplug new``."""
    parser = subparsers.add_parser(
        "new", help="scaffold a backend plugin project (torch_NAME, device NAME)"
    )
    parser.add_argument("name", help="the device name, a lower-case identifier (e.g. bar)")
    parser.add_argument(
        "--directory",
        type=Path,
        help="where to create the project (default: ./torch_NAME); must not exist",
    )
    parser.add_argument(
        "--driver",
        action="store_true",
        help="also write a device driver (C, torchplug/driver.h) for the backend to run on, "
        "instead of torchplug's simulator",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        target = create(args.name, args.directory, driver=args.driver)
    except ValueError as error:
        sys.stderr.write(f"torchplug new: {error}\n")
        return 2
    sys.stdout.write(
        f"Created {target}. Next: cd {target} && uv venv && uv pip install -e . --group test "
        f"&& uv run pytest && uv run torchplug check {args.name}\n"
    )
    return 0


def create(name: str, directory: Path | None = None, *, driver: bool = False) -> Path:
    """Writes the project for device ``name`` into ``directory`` (default
    ``./torch_<name>``), with a device driver if ``driver``, and returns that directory."""
    if not name.isidentifier() or name != name.lower() or keyword.iskeyword(name):
        raise ValueError(f"{name!r} is not a device name: use a lower-case Python identifier.")
    package = f"torch_{name}"
    target = (directory or Path(package)).resolve()
    if target.exists():
        raise ValueError(f"{target} already exists.")
    # The driver's placeholders first: what they insert names __NAME__.
    values = {**driver_values(driver), "__NAME__": name, "__PACKAGE__": package, **requirements()}
    templates = resources.files(__package__) / "templates"
    for relative, text in _walk(templates, ""):
        if relative.startswith(DRIVER_FOLDER) and not driver:
            continue
        path = target / _substitute(relative, values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_substitute(text, values))
    log.info("torchplug new: wrote %s", target)
    return target


def driver_values(driver: bool) -> dict[str, str]:
    """What the templates hold where a project with a driver differs (nothing
    without one): the CMake subdirectory, the Backend's ``driver=`` (the library
    in the package) and the README's line."""
    with_driver = {
        "__DRIVER_SUBDIRECTORY__\n": "# The device driver the backend runs on (driver/).\nadd_subdirectory(driver)\n",
        "__DRIVER_IMPORT__\n": "import importlib.util\nfrom pathlib import Path\n",
        "__DRIVER_ARGUMENT__\n": (
            "    # The device driver (driver/driver.c), installed beside the compiled\n"
            "    # module (find_spec finds it in an editable install too, without loading it).\n"
            '    driver=Path(importlib.util.find_spec("__PACKAGE__._C").origin).parent\n'
            '    / "drivers"\n'
            '    / "lib__NAME___driver.so",\n'
        ),
        "__DRIVER_LAYOUT__\n": (
            "- `driver/driver.c`: the device driver (`torchplug/driver.h`), a C library linked to\n"
            "  neither torch nor Python; check it alone with\n"
            "  `python -m torchplug_testing.driver src/__PACKAGE__/drivers/lib__NAME___driver.so`\n"
            "  after an editable install, or with `torchplug check __NAME__` (its `driver` group).\n"
        ),
    }
    return with_driver if driver else dict.fromkeys(with_driver, "")


def requirements() -> dict[str, str]:
    """The version ranges the new project builds and runs with: the torch
    releases the running torchplug supports (the project's kernel is built on
    torch's stable ABI, so one build serves them all) and torchplug's release line."""
    core = metadata.version("torchplug")
    core_major, core_minor = (int(part) for part in core.split(".")[:2])
    core_next = f"{core_major}.{core_minor + 1}" if core_major == 0 else f"{core_major + 1}.0"
    return {
        "__TORCH_SPEC__": supported_torch(),
        "__TORCHPLUG_SPEC__": f"torchplug>={core},<{core_next}",
        "__TESTING_SPEC__": f"torchplug-testing>={core},<{core_next}",
    }


def supported_torch() -> str:
    """torchplug's own requirement on torch (``torch>=2.14,<2.16``)."""
    for requirement in metadata.requires("torchplug") or []:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement)
        if name and name.group(0).lower() == "torch" and ";" not in requirement:
            return requirement.replace(" ", "")
    raise RuntimeError("the installed torchplug declares no requirement on torch: reinstall it")


def _walk(folder: Traversable, prefix: str) -> Iterator[tuple[str, str]]:
    """(path in the project, template text) of every template under ``folder``."""
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        relative = f"{prefix}{entry.name}"
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _walk(entry, f"{relative}/")
        elif entry.name.endswith(TEMPLATE_SUFFIX):
            stem = relative[: -len(TEMPLATE_SUFFIX)]
            head, _, base = stem.rpartition("/")
            stem = f"{head}/{RENAMED.get(base, base)}" if head else RENAMED.get(base, base)
            yield stem, entry.read_text()


def _substitute(text: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text
