"""Fixtures of the workspace tests."""

from pathlib import Path

import pytest

from fresh_interpreter import PluginDir


@pytest.fixture
def plugin_dir(tmp_path: Path) -> PluginDir:
    root = tmp_path / "site"
    root.mkdir()
    return PluginDir(root)
