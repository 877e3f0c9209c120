"""Generated pages cannot go stale: their tables have the rows their tools write.

docs/performance.md's figures table comes from `torchplug bench --write-docs`,
docs/conformance.md's matrix from tools/conformance_matrix.py. The measured
values are refreshed by running those; these tests fail when the rows, the
columns or the targets are no longer the ones the tools would write (a row
added, renamed or removed, a target changed, a suite group or a device added).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from torchplug_bench import docs_page

ROOT = Path(__file__).resolve().parents[1]


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_performance_page_has_the_rows_and_targets_the_bench_writes() -> None:
    page = (ROOT / "docs" / "performance.md").read_text()
    assert docs_page.table_structure(page) == docs_page.expected_structure(), (
        "docs/performance.md's figures table is not what `torchplug bench --write-docs "
        "docs/performance.md` writes: run it"
    )


def test_conformance_page_has_the_groups_devices_and_dtypes_the_tool_writes() -> None:
    tool = load_tool("conformance_matrix")
    page = (ROOT / "docs" / "conformance.md").read_text()
    assert tool.page_structure(page) == tool.expected_structure(tool.installed_devices()), (
        "docs/conformance.md is not what `uv run python tools/conformance_matrix.py` writes: "
        "run it (and describe any new suite group in the page's group table)"
    )
