"""Run a function right after a module is first imported, or now if it already is."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence

_pending: dict[str, list[Callable[[types.ModuleType], None]]] = {}


def after_import(name: str, callback: Callable[[types.ModuleType], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _pending.setdefault(name, []).append(callback)
    if not any(isinstance(finder, _PostImportFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of a watched module so that callbacks run after it executes."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
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
