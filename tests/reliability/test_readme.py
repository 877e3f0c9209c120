"""README.md's table names tests that exist, so it stays a true index of the reliability cases."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"`([\w/]+\.py)::(\w+)`")


def test_every_listed_test_exists() -> None:
    references = REFERENCE.findall((Path(__file__).parent / "README.md").read_text())
    assert len(references) > 30
    missing = []
    for path, name in references:
        tree = ast.parse((ROOT / path).read_text())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        if name not in defined:
            missing.append(f"{path}::{name}")
    assert not missing, missing


def test_every_reliability_test_is_listed() -> None:
    listed = set(REFERENCE.findall((Path(__file__).parent / "README.md").read_text()))
    for module in ("test_device_failures.py", "test_plugin_failures.py"):
        tree = ast.parse((Path(__file__).parent / module).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                assert (f"tests/reliability/{module}", node.name) in listed, node.name
