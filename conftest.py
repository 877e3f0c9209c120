"""The workspace's whole test session (``uv run pytest`` from the root)."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Runs the modules that hold slow tests first, each kept whole and in order.

    pytest-xdist (``--dist loadfile``) hands whole modules to its workers,
    by default ordered by their number of tests (a stable sort: modules of
    equal counts keep this order); with ``--no-loadscope-reorder`` it takes
    this order as it is, so a module of several minutes (the release builds,
    in tests/) no longer runs alone at the end while the other worker idles.
    """
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)
