"""The workspace's whole test session (``uv run pytest`` from the root)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
# The longest modules, longest first (each minutes of one worker on a two-core
# CI machine: the sums of their tests' durations in a clean-clone run). test_release.py
# also builds the release files that test_wheels.py waits for.
LONGEST_MODULES = tuple(
    ROOT / name
    for name in (
        "tests/test_release.py",
        "tests/test_conformance.py",
        "tests/test_compile_real_models.py",
        "tests/test_docs.py",
        "tests/test_launch_blocking.py",
        "tests/test_conformance_discrete.py",
    )
)
missing = [str(path) for path in LONGEST_MODULES if not path.exists()]
assert not missing, f"conftest.py schedules modules that do not exist: {missing}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Runs the longest modules first, then the other modules holding slow
    tests, then the rest, each module kept whole and in order.

    pytest-xdist (``--dist loadfile --no-loadscope-reorder``, pyproject.toml)
    hands whole modules to its workers in this order; a module of several
    minutes handed out last would run alone at the end while the other worker
    idles. Started first, the short modules fill in around it.
    """
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> tuple[int, bool]:
        if item.path in LONGEST_MODULES:
            return LONGEST_MODULES.index(item.path), False
        return len(LONGEST_MODULES), item.path not in slow_modules

    items.sort(key=rank)
