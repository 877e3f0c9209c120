"""Sphinx configuration for the torchplug docs (MyST Markdown)."""

project = "torchplug"
author = "The torchplug developers"
copyright = "2026, The torchplug developers"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
html_theme = "alabaster"
