"""Run a function right after a module is first imported, or now if it already is.

A module still executing when the function is registered (one whose own
``import torch`` activated the backends, as ``from accelerate import
Accelerator`` does as a script's first line) is not imported yet: its
function runs at the first import of any module after it has finished, which
the rest of the import statement that loads it almost always makes.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence

_pending: dict[str, list[Callable[[types.ModuleType], None]]] = {}
# Watched modules that were mid-execution when watched: run once they are done.
_executing: list[types.ModuleType] = []


def after_import(name: str, callback: Callable[[types.ModuleType], None]) -> None:
    module = sys.modules.get(name)
    if module is not None and not _executing_now(module):
        callback(module)
        return
    _pending.setdefault(name, []).append(callback)
    if module is not None and module not in _executing:
        _executing.append(module)
    if not any(isinstance(finder, _PostImportFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


def _executing_now(module: types.ModuleType) -> bool:
    # importlib marks a module's spec while its code runs (_bootstrap._load_unlocked).
    return bool(getattr(module.__spec__, "_initializing", False))


def _run_finished() -> None:
    for module in [module for module in _executing if not _executing_now(module)]:
        _executing.remove(module)
        callbacks = _pending.pop(module.__name__, [])
        if sys.modules.get(module.__name__) is not module:
            continue  # its code raised: never imported
        for callback in callbacks:
            callback(module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of a watched module so that callbacks run after it executes."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if _executing:
            _run_finished()
        if fullname not in _pending:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _CallbackLoader(spec.loader, fullname)
        return spec


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, wrapped: importlib.abc.Loader, name: str) -> None:
        self._wrapped = wrapped
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._wrapped.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._wrapped.exec_module(module)
        for callback in _pending.pop(self._name, []):
            callback(module)
