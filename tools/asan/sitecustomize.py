"""Loads torchplug's native modules from the sanitizer build (tools/asan.sh).

Put on PYTHONPATH by the script, so every interpreter it starts, children
included, imports ``torchplug._C`` and ``torchplug._distributed`` from
``SANITIZED_TORCHPLUG_BUILD`` (the sanitizer build's torch-<release>/ folder)
instead of the workspace's editable install, whose
finder this one goes ahead of. (The variable's name does not start with
TORCHPLUG_: the tests' child processes drop those.)
"""

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

_BUILD = Path(os.environ["SANITIZED_TORCHPLUG_BUILD"])
_MODULES = {
    name: next(_BUILD.glob(f"{name.rpartition('.')[2]}.cpython-*.so"), None)
    for name in ("torchplug._C", "torchplug._distributed")
}


class _SanitizedModules:
    @staticmethod
    def find_spec(name, path=None, target=None):
        location = _MODULES.get(name)
        if location is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(name, str(location))
        return importlib.util.spec_from_file_location(name, location, loader=loader)


sys.meta_path.insert(0, _SanitizedModules)
