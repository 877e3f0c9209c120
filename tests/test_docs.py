"""The docs build with warnings as errors, and every Python example in them runs."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchplug_testing import child

DOCS = Path(__file__).resolve().parents[1] / "docs"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def examples() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for number, match in enumerate(PYTHON_BLOCK.finditer(page.read_text()), start=1):
            found.append((f"{page.name}#{number}", match.group(1)))
    return found


def test_sphinx_build_has_no_warnings(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(DOCS),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("where", "code"), examples(), ids=[where for where, _ in examples()])
def test_python_example_runs(where: str, code: str, tmp_path: Path) -> None:
    # The venv's bin first: examples run the console scripts it installs.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    result = child.run_python(code, child.child_environment(PATH=path), timeout=300, cwd=tmp_path)
    assert result.returncode == 0, f"{where} failed:\n{result.stderr}"


# The user guide's examples that use streams or train, run again with the
# stream sanitizer on: the documented ways to use streams and to train are free
# of races. (The pages of single-stream tensor and device calls are left to
# the plain runs, within the suite's time budget; torch.compile examples are
# left out: torch does not trace under the sanitizer's dispatch mode.)
SANITIZED_PAGES = ("training.md", "streams.md")


@pytest.mark.parametrize(
    ("where", "code"),
    [(where, code) for where, code in examples() if where.split("#")[0] in SANITIZED_PAGES],
    ids=[where for where, _ in examples() if where.split("#")[0] in SANITIZED_PAGES],
)
def test_python_example_runs_clean_under_the_sanitizer(
    where: str, code: str, tmp_path: Path
) -> None:
    environment = child.child_environment(TORCHPLUG_SANITIZER="1")
    result = child.run_python(code, environment, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, f"{where} failed under the sanitizer:\n{result.stderr}"


def test_architecture_names_every_module_of_the_core() -> None:
    """docs/architecture.md's module table cannot drift: every module of the
    core's Python package is named there by its path."""
    package = Path(__file__).resolve().parents[1] / "core/src/torchplug"
    page = (DOCS / "architecture.md").read_text()
    modules = sorted(str(path.relative_to(package)) for path in package.rglob("*.py"))
    missing = [module for module in modules if f"`{module}`" not in page]
    assert not missing, f"docs/architecture.md does not describe {missing}"
