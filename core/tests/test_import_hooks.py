"""``after_import`` runs a function once the watched module has been imported, also
when it is watched while its own code is still running (a framework whose
``import torch`` activates the backends)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchplug.inductor.hooks import after_import

WATCHES_ITSELF = """
from torchplug.inductor.hooks import after_import

seen = []
after_import(__name__, lambda module: seen.append(module.DEFINED_AFTER_THE_WATCH))
DEFINED_AFTER_THE_WATCH = True
"""


@pytest.fixture
def scratch_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("torchplug_hooktest_")]:
        del sys.modules[name]


def test_runs_after_a_module_first_imported(scratch_modules: Path) -> None:
    (scratch_modules / "torchplug_hooktest_later.py").write_text("VALUE = 1\n")
    seen: list[int] = []
    after_import("torchplug_hooktest_later", lambda module: seen.append(module.VALUE))
    assert seen == []
    import torchplug_hooktest_later  # noqa: F401

    assert seen == [1]


def test_runs_at_once_for_an_imported_module() -> None:
    seen: list[types.ModuleType] = []
    after_import("json", seen.append)
    assert seen == [sys.modules["json"]]


def test_a_module_watched_while_it_runs_is_handled_once_it_has_finished(
    scratch_modules: Path,
) -> None:
    (scratch_modules / "torchplug_hooktest_executing.py").write_text(WATCHES_ITSELF)
    (scratch_modules / "torchplug_hooktest_next.py").write_text("")
    import torchplug_hooktest_executing as executing

    assert executing.seen == [], "ran on a half-executed module"
    import torchplug_hooktest_next  # noqa: F401 - the next import after it finished

    assert executing.seen == [True]


def test_a_module_that_raised_is_not_handled(scratch_modules: Path) -> None:
    (scratch_modules / "torchplug_hooktest_raises.py").write_text(
        WATCHES_ITSELF.replace("seen = []", "import builtins\nseen = builtins.seen = []")
        + "raise ImportError('broken')\n"
    )
    (scratch_modules / "torchplug_hooktest_after.py").write_text("")
    with pytest.raises(ImportError, match="broken"):
        import torchplug_hooktest_raises  # noqa: F401
    import builtins

    import torchplug_hooktest_after  # noqa: F401

    assert builtins.seen == []
    del builtins.seen
