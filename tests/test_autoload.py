"""Autoload done right: every case in a fresh interpreter (see conftest.run_python)."""

from __future__ import annotations

import json

import pytest

from fresh_interpreter import PluginDir, run_python

COUNT_REGISTRATIONS = """
from torchplug.activation import registration
registrations = []
_original = registration.register
def _counting(backend, status, config):
    registrations.append(backend.name)
    return _original(backend, status, config)
registration.register = _counting
"""


def ok(result) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize(
    "imports",
    [
        "import torch\nimport torch_foo",
        "import torch_foo\nimport torch",
        "import torch_foo\nimport torch_foo\nimport torch\nimport torch_foo",
        "from torch_foo import backend\nimport torch\nbackend.autoload(); backend.autoload()",
    ],
)
def test_import_orders_register_once(imports: str) -> None:
    out = ok(
        run_python(
            COUNT_REGISTRATIONS
            + imports
            + "\nprint(registrations.count('foo'), torch.ones(1, device='foo').device)"
        )
    )
    assert out.strip() == "1 foo:0"


def test_concurrent_activation_from_threads() -> None:
    out = ok(
        run_python(
            COUNT_REGISTRATIONS
            + """
import threading
def work():
    import torch_foo
    torch_foo._autoload()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
import torch
print(registrations.count("foo"), torch.foo.device_count())
"""
        )
    )
    assert out.strip() == "1 2"


def test_spawned_and_forked_children() -> None:
    out = ok(
        run_python(
            """
import multiprocessing as mp
import torch

def child_value(queue):
    import torch
    queue.put(float((torch.ones(3, device="foo") * 2).sum().item()))

def child_after_parent_init(queue):
    import torch
    try:
        torch.ones(1, device="foo")
        queue.put("no error")
    except RuntimeError as error:
        queue.put(str(error))

if __name__ == "__main__":
    for method in ("spawn", "fork"):
        ctx = mp.get_context(method)
        q = ctx.Queue()
        p = ctx.Process(target=child_value, args=(q,)); p.start(); print(method, q.get(timeout=60)); p.join()
    torch.ones(1, device="foo")  # the parent initialises the device
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child_after_parent_init, args=(q,)); p.start(); print(q.get(timeout=60)); p.join()
    q = mp.get_context("spawn").Queue()
    p = mp.get_context("spawn").Process(target=child_value, args=(q,)); p.start(); print("spawn", q.get(timeout=60)); p.join()
"""
        )
    )
    lines = out.splitlines()
    assert lines[0] == "spawn 6.0"
    assert lines[1] == "fork 6.0"
    assert "Cannot re-initialize foo in forked subprocess" in lines[2]
    assert "spawn" in lines[2]
    assert lines[3] == "spawn 6.0"


def test_dataloader_with_workers() -> None:
    out = ok(
        run_python(
            """
import torch
from torch.utils.data import DataLoader, TensorDataset
data = TensorDataset(torch.arange(32, dtype=torch.float32).reshape(16, 2))
total = torch.zeros((), device="foo")
for (batch,) in DataLoader(data, batch_size=4, num_workers=2):
    total += batch.to("foo").sum()
print(total.item())
"""
        )
    )
    assert out.strip() == "496.0"


def test_broken_plugin_leaves_import_torch_working(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("torch_broken", "broken", setup="_failing_setup")
    result = run_python(
        """
import torch
assert not hasattr(torch, "foo")  # lost PrivateUse1 to the backend chosen below
print(torch.broken.is_available())
try:
    torch.broken.init()
except RuntimeError as error:
    print("init:", error, "| cause:", error.__cause__)
try:
    torch.ones(1, device="broken")
except RuntimeError as error:
    print("tensor:", error)
""",
        plugins=plugin_dir,
        TORCHPLUG_PRIVATEUSE1="broken",
    )
    out = ok(result)
    lines = out.splitlines()
    assert lines[0] == "False"
    assert "libvendor_runtime.so.3" in lines[1]
    assert "not active" in lines[1]
    assert "libvendor_runtime.so.3" in lines[2]
    # Logged once, with the cause, at import.
    assert result.stderr.count("torchplug backend 'broken' failed to load") == 1
    doctor = json.loads(
        ok(
            run_python(
                "from torchplug.cli import main; main(['doctor', '--json'])",
                plugins=plugin_dir,
                TORCHPLUG_PRIVATEUSE1="broken",
            )
        )
    )
    entry = next(b for b in doctor["backends"] if b["entry_point"] == "torch_broken")
    assert entry["status"] == "failed"
    assert "libvendor_runtime.so.3" in entry["reason"]


def test_strict_mode_raises_at_import(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("torch_broken", "broken", setup="_failing_setup")
    result = run_python(
        "import torch", plugins=plugin_dir, TORCHPLUG_PRIVATEUSE1="broken", TORCHPLUG_STRICT="1"
    )
    assert result.returncode != 0
    assert "libvendor_runtime.so.3" in result.stderr
    assert "TORCHPLUG_STRICT=1" in result.stderr


def test_two_privateuse1_backends_default_rule(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("torch_bar", "bar")
    out = ok(
        run_python(
            """
import torch
import torchplug
s = torchplug.statuses()
print(torch._C._get_privateuse1_backend_name(), s["bar"].state.value, s["foo"].state.value)
print(s["foo"].reason)
print(torch.ones(1, device="bar").device)
""",
            plugins=plugin_dir,
        )
    )
    first, reason, device = out.splitlines()
    assert first == "bar active inactive"
    assert "'bar'" in reason
    assert "TORCHPLUG_PRIVATEUSE1=foo" in reason
    assert device == "bar:0"


def test_two_privateuse1_backends_env_choice(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("torch_bar", "bar")
    out = ok(
        run_python(
            """
import torch
import torchplug
print(torch._C._get_privateuse1_backend_name(), torchplug.statuses()["bar"].reason)
print(torch.ones(1, device="foo").device)
""",
            plugins=plugin_dir,
            TORCHPLUG_PRIVATEUSE1="foo",
        )
    )
    first, device = out.splitlines()
    assert first.startswith("foo ")
    assert "TORCHPLUG_PRIVATEUSE1=bar" in first
    assert device == "foo:0"


def test_privateuse1_taken_by_foreign_plugin(plugin_dir: PluginDir) -> None:
    plugin_dir.add(
        "torch_legacy",
        """
        def _autoload():
            import torch
            torch.utils.rename_privateuse1_backend("legacy")
        """,
        {"torch.backends": {"torch_legacy": "torch_legacy:_autoload"}},
        requires=(),
    )
    out = ok(
        run_python(
            """
import torch
import torchplug
print(torch._C._get_privateuse1_backend_name(), torchplug.statuses()["foo"].state.value)
print(torchplug.statuses()["foo"].reason)
""",
            plugins=plugin_dir,
        )
    )
    first, reason = out.splitlines()
    assert first == "legacy inactive"
    assert "'legacy'" in reason
    doctor = json.loads(
        ok(
            run_python(
                "from torchplug.cli import main; main(['doctor', '--json'])", plugins=plugin_dir
            )
        )
    )
    legacy = next(b for b in doctor["backends"] if b["entry_point"] == "torch_legacy")
    assert legacy["torchplug"] is False
    assert legacy["status"] == "loaded"
    assert doctor["privateuse1_owner"] == "legacy"
    foo = next(b for b in doctor["backends"] if b["entry_point"] == "torch_foo")
    assert foo["status"] == "inactive"


# Whether torch has foo, and why not: the reason torchplug recorded, or None
# where torchplug was never imported.
FOO_LOADED = """
import sys, torch
torchplug = sys.modules.get("torchplug")
print(hasattr(torch, "foo"), torchplug and torchplug.statuses()["foo"].reason)
"""


@pytest.mark.parametrize(
    ("env", "printed"),
    [
        pytest.param(
            {"TORCHPLUG_DISABLE": "foo,other"},
            "False disabled by TORCHPLUG_DISABLE=foo,other",
            id="disable-list-skips-foo",
        ),
        pytest.param(
            {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, "False None", id="autoload-off-loads-nothing"
        ),
    ],
)
def test_switched_off_foo_is_not_loaded(env: dict[str, str], printed: str) -> None:
    assert ok(run_python(FOO_LOADED, **env)).strip() == printed


def test_environment_unchanged_for_children() -> None:
    out = ok(
        run_python(
            """
import os, subprocess, sys, json
before = dict(os.environ)
import torch
torch.ones(1, device="foo").cpu()
after = dict(os.environ)
child = json.loads(subprocess.check_output([sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"]))
print(before == after, {k: v for k, v in child.items() if k not in before})
"""
        )
    )
    assert out.strip() == "True {}"


def test_version_mismatch_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import torchplug
    from torchplug import _build_info

    monkeypatch.setattr(_build_info, "TORCH_VERSION", "1.0.0")
    with pytest.raises(
        torchplug.BackendLoadError, match=r"built for torch 1\.0\.0 but torch .* is running"
    ):
        torchplug.check_torch_version()


def test_guarded_entry_point_imports_dotted_plugin_modules(plugin_dir: PluginDir) -> None:
    plugin_dir.add("vendor", "", {})
    (plugin_dir.root / "vendor" / "device.py").write_text("print('vendor.device imported')\n")
    out = ok(
        run_python(
            """
from importlib.metadata import EntryPoint
entry = EntryPoint("vendor", "torchplug:plugin.vendor.device", "torch.backends").load()
print(repr(entry))
entry()
""",
            plugins=plugin_dir,
            TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        )
    )
    assert out.splitlines() == [
        "<torchplug entry point importing vendor.device>",
        "vendor.device imported",
    ]
