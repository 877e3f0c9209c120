"""Plugins that fail, lose PrivateUse1, are disabled or shadowed: clear errors, working neighbours.

Each case runs in a fresh interpreter (fresh_interpreter.run_python) with a
bounded timeout, asserts the error a user sees and that the other devices
still work afterwards.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from fresh_interpreter import PluginDir, run_python

CASE_TIMEOUT = 150
# Two periods that are not part of an ellipsis ("torch.load(..., map_location=...)").
DOUBLED_PERIOD = re.compile(r"(?<!\.)\.\.(?!\.)")

# Appended to a case: the devices that must keep working, one line each, and
# every recorded outcome that is not "active", with its explanation.
OTHER_DEVICES_WORK = """
for device in {devices!r}:
    print("works:", device, (torch.ones(2, device=device) * 2).sum().item())
import torchplug
from torchplug.errors import explain as _explain
for _status in [
    *torchplug.statuses().values(), *torchplug.shadowed(), *torchplug.import_failures().values()
]:
    if not _status.active:
        print("outcome:", _status.backend.name, _status.state.value, "|", _status.reason)
        print("explained:", _explain(_status))
"""


def run_case(
    code: str, *, devices: tuple[str, ...] = (), plugins: PluginDir | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    script = code + OTHER_DEVICES_WORK.format(devices=devices)
    result = run_python(script, plugins=plugins, timeout=CASE_TIMEOUT, **env)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    for device in devices:
        assert f"works: {device} 4.0" in result.stdout, result.stdout
    for text in result.stdout.splitlines():
        if text.startswith("outcome:"):
            assert not text.endswith("|"), f"a status without a reason: {text}"
        if text.startswith(("outcome:", "explained:")):
            assert not DOUBLED_PERIOD.search(text), text
    return result


def doctor(plugins: PluginDir | None = None, **env: str) -> dict:
    result = run_python(
        "from torchplug.cli import main; main(['doctor', '--json'])",
        plugins=plugins,
        timeout=CASE_TIMEOUT,
        **env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def line(result: subprocess.CompletedProcess[str], prefix: str) -> str:
    return next(text for text in result.stdout.splitlines() if text.startswith(prefix))


# A case's script: makes an hpu tensor, or prints why it cannot ("tensor: ...").
HPU_TENSOR = """
import torch
try:
    torch.ones(1, device="hpu")
    print("tensor: no error")
except RuntimeError as error:
    print("tensor:", error)
"""

ATTRIBUTE_ERROR_OF = """
try:
    torch.{name}
    print("attribute: no error")
except AttributeError as error:
    print("attribute:", error)
"""


def run_failing_aaa(
    plugin_dir: PluginDir, step: str, attribute: str, devices: tuple[str, ...]
) -> subprocess.CompletedProcess[str]:
    """A case beside a torch_aaa plugin whose ``step`` (``"prepare"``, before it
    takes PrivateUse1, or ``"setup"``, after) fails as a missing native library
    does; it prints PrivateUse1's owner ("owner:"), aaa's state and reason
    ("aaa:") and the error of ``torch.<attribute>`` ("attribute:")."""
    plugin_dir.add_torchplug_backend("torch_aaa", "aaa", **{step: "_failing_setup"})
    return run_case(
        "import torch\nimport torchplug\n"
        "print('owner:', torch._C._get_privateuse1_backend_name())\n"
        "aaa = torchplug.statuses()['aaa']\n"
        "print('aaa:', aaa.state.value, '|', aaa.reason)\n"
        + ATTRIBUTE_ERROR_OF.format(name=attribute),
        devices=devices,
        plugins=plugin_dir,
    )


def test_plugin_failing_before_it_takes_privateuse1_leaves_it_to_a_working_one(
    plugin_dir: PluginDir,
) -> None:
    # "aaa" sorts before foo; before this, it took PrivateUse1 and foo stayed inactive.
    result = run_failing_aaa(plugin_dir, "prepare", attribute="aaa", devices=("foo", "hpu"))
    assert line(result, "owner:") == "owner: foo"
    assert line(result, "aaa:").startswith("aaa: failed |")
    attribute = line(result, "attribute:")
    assert "torch.aaa is unavailable" in attribute
    assert "libvendor_runtime.so.3" in attribute
    assert result.stderr.count("torchplug backend 'aaa' failed to load") == 1
    strict = run_python("import torch", plugins=plugin_dir, TORCHPLUG_STRICT="1", timeout=150)
    assert strict.returncode != 0
    assert "torchplug backend 'aaa' failed to load (TORCHPLUG_STRICT=1)" in strict.stderr


def test_plugin_failing_in_setup_says_it_keeps_privateuse1(plugin_dir: PluginDir) -> None:
    # setup runs after rename_privateuse1_backend, which torch accepts once per
    # process: the key cannot go to foo, so every message says so and what to set.
    result = run_failing_aaa(plugin_dir, "setup", attribute="foo", devices=("hpu",))
    assert line(result, "owner:") == "owner: aaa"
    reason = line(result, "aaa:")
    assert "libvendor_runtime.so.3" in reason
    assert "torch cannot give back within a process" in reason
    assert "Set TORCHPLUG_DISABLE=aaa" in reason
    attribute = line(result, "attribute:")
    assert "failed after taking the key" in attribute
    assert "Set TORCHPLUG_PRIVATEUSE1=foo or TORCHPLUG_DISABLE=aaa" in attribute
    warnings = [t for t in result.stderr.splitlines() if "backend 'aaa' failed to load" in t]
    assert len(warnings) == 1, result.stderr
    assert "cannot give back" in warnings[0]
    # Either remedy gives PrivateUse1 to a backend that works.
    for env in ({"TORCHPLUG_DISABLE": "aaa"}, {"TORCHPLUG_PRIVATEUSE1": "foo"}):
        run_case("import torch", devices=("foo", "hpu"), plugins=plugin_dir, **env)


def test_plugin_raising_at_import_leaves_import_torch_working(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend(
        "torch_aaa", "aaa", raise_on_import="ImportError('libaaa_driver.so: not found')"
    )
    result = run_case(
        "import torch\nprint('owner:', torch._C._get_privateuse1_backend_name())\n"
        + ATTRIBUTE_ERROR_OF.format(name="aaa"),
        devices=("foo", "hpu"),
        plugins=plugin_dir,
    )
    assert line(result, "owner:") == "owner: foo"
    assert "libaaa_driver.so: not found" in line(result, "attribute:")
    assert result.stderr.count("torchplug plugin torch_aaa (torch_aaa) failed to import") == 1
    entry = next(b for b in doctor(plugin_dir)["backends"] if b["entry_point"] == "torch_aaa")
    assert entry["status"] == "failed"
    assert "libaaa_driver.so: not found" in entry["reason"]
    strict = run_python("import torch", plugins=plugin_dir, TORCHPLUG_STRICT="1", timeout=150)
    assert strict.returncode != 0
    assert "TORCHPLUG_STRICT=1" in strict.stderr


def test_hpu_plugin_raising_at_import_leaves_import_torch_working(plugin_dir: PluginDir) -> None:
    # A vhabana_frameworks ahead of the installed one on sys.path, with the
    # real entry-point module and a device module that raises.
    import vhabana_frameworks

    package = plugin_dir.root / "vhabana_frameworks"
    (package / "torch").mkdir(parents=True)
    (package / "__init__.py").write_text(Path(vhabana_frameworks.__file__).read_text())
    (package / "torch" / "__init__.py").write_text("raise OSError('libhl_thunk.so: missing')\n")
    result = run_case(
        HPU_TENSOR,
        devices=("foo",),
        plugins=plugin_dir,
    )
    tensor = line(result, "tensor:")
    assert "The 'hpu' backend is not active" in tensor
    assert "libhl_thunk.so: missing" in tensor


def test_a_second_privateuse1_plugin_is_announced_once_at_warning(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("torch_bar", "bar")
    result = run_case("import torch", devices=("bar", "hpu"), plugins=plugin_dir)
    announcement = "torchplug backend 'foo' is inactive: PrivateUse1 belongs to 'bar'"
    assert result.stderr.count(announcement) == 1, result.stderr
    assert "TORCHPLUG_PRIVATEUSE1=foo" in result.stderr


def test_a_declared_priority_wins_over_name_order(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("torch_zzz", "zzz", priority=10)
    result = run_case(
        "import torch\nimport torchplug\nprint('foo:', torchplug.statuses()['foo'].reason)",
        devices=("zzz",),
        plugins=plugin_dir,
    )
    reason = line(result, "foo:")
    assert "PrivateUse1 belongs to 'zzz'" in reason
    assert "priority 10" in reason
    chosen = run_case(
        "import torch", devices=("foo",), plugins=plugin_dir, TORCHPLUG_PRIVATEUSE1="foo"
    )
    assert "is inactive" not in chosen.stderr


def test_an_unknown_privateuse1_choice_warns_once() -> None:
    result = run_case("import torch", devices=("foo",), TORCHPLUG_PRIVATEUSE1="bogus")
    assert result.stderr.count("TORCHPLUG_PRIVATEUSE1=bogus names no installed") == 1


def test_two_distributions_of_npu_name_both(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("torch_npu_other", "npu")
    result = run_case(
        """
import torch, torch_vnpu
try:
    torch_vnpu.fast_gelu(torch.ones(2, device="npu"))
    print("ops: no error")
except RuntimeError as error:
    print("ops:", error)
""",
        devices=("npu", "hpu"),
        plugins=plugin_dir,
        TORCHPLUG_PRIVATEUSE1="npu",
    )
    ops = line(result, "ops:")
    assert "torch_npu_other" in ops
    assert "torch_vnpu" in ops
    assert "TORCHPLUG_DISABLE=torch_npu_other" in ops
    assert ": ." not in ops
    warning = "torchplug backend 'npu' is inactive: the 'npu' device is provided by both"
    assert result.stderr.count(warning) == 1, result.stderr
    report = doctor(plugin_dir, TORCHPLUG_PRIVATEUSE1="npu")
    entry = next(b for b in report["backends"] if b["entry_point"] == "torch_vnpu")
    assert entry["status"] == "shadowed"
    assert "torch_npu_other" in entry["reason"]
    # Disabling the other distribution by name gives the device to torch_vnpu.
    run_case(
        "import torch, torch_vnpu\nprint(torch_vnpu.fast_gelu(torch.ones(2, device='npu')))",
        devices=("npu",),
        plugins=plugin_dir,
        TORCHPLUG_PRIVATEUSE1="npu",
        TORCHPLUG_DISABLE="torch_npu_other",
    )


def test_two_distributions_of_hpu_name_both(plugin_dir: PluginDir) -> None:
    plugin_dir.add_torchplug_backend("vhabana_other", "hpu", dispatch_key="hpu")
    result = run_case("import torch", devices=("hpu", "foo"), plugins=plugin_dir)
    announced = [
        text
        for text in result.stderr.splitlines()
        if "the 'hpu' device is provided by both" in text
    ]
    assert len(announced) == 1, result.stderr
    assert "vhabana_other" in announced[0]
    assert "vhabana_frameworks" in announced[0]


def test_disabled_hpu_tensor_creation_names_the_setting() -> None:
    # Before: ModuleNotFoundError: No module named 'torch.hpu'.
    result = run_case(
        HPU_TENSOR + ATTRIBUTE_ERROR_OF.format(name="hpu"),
        devices=("foo",),
        TORCHPLUG_DISABLE="hpu",
    )
    for prefix in ("tensor:", "attribute:"):
        message = line(result, prefix)
        assert "disabled by TORCHPLUG_DISABLE=hpu" in message
        assert "Remove 'hpu' from TORCHPLUG_DISABLE" in message


def test_disabled_foo_names_the_setting() -> None:
    # Before: "module 'torch' has no attribute 'foo'".
    result = run_case(
        "import torch\nprint('hasattr:', hasattr(torch, 'foo'))\n"
        + ATTRIBUTE_ERROR_OF.format(name="foo"),
        devices=("npu", "hpu"),
        TORCHPLUG_DISABLE="foo",
    )
    assert line(result, "hasattr:") == "hasattr: False"
    assert "disabled by TORCHPLUG_DISABLE=foo" in line(result, "attribute:")


def test_losing_backend_attribute_names_the_winner() -> None:
    result = run_case(
        "import torch\n"
        + ATTRIBUTE_ERROR_OF.format(name="npu")
        + """
for make in (lambda: torch.device("npu"), lambda: torch.ones(1, device="npu")):
    try:
        make()
    except RuntimeError as error:
        print("parser:", error)
""",
        devices=("foo", "hpu"),
    )
    attribute = line(result, "attribute:")
    assert "PrivateUse1 belongs to 'foo'" in attribute
    assert "TORCHPLUG_PRIVATEUSE1=npu" in attribute
    # torch's C++ device parser has no hook: its own message, as docs/devices.md shows.
    parser = [text for text in result.stdout.splitlines() if text.startswith("parser:")]
    assert len(parser) == 2
    for text in parser:
        assert text.endswith("device type at start of device string: npu"), text
    assert "TORCHPLUG_PRIVATEUSE1=npu" in result.stderr  # the WARNING at import says why


def test_explicit_import_with_autoload_off_gets_privateuse1() -> None:
    # Before: npu lost PrivateUse1 to foo, which was never loaded.
    result = run_case(
        """
import torch
import torch_vnpu
print("npu:", torch_vnpu.fast_gelu(torch.ones(2, device="npu")).device)
import torch_foo
"""
        + ATTRIBUTE_ERROR_OF.format(name="foo"),
        devices=("npu",),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert line(result, "npu:") == "npu: npu:0"
    assert "PrivateUse1 belongs to 'npu'" in line(result, "attribute:")
    assert result.stderr.count("torchplug backend 'foo' is inactive") == 1


def test_failure_messages_have_a_reason_and_single_periods() -> None:
    result = run_case(
        """
import torch
try:
    torch.foo.init()
except RuntimeError as error:
    print("init:", error)
""",
        devices=("hpu",),
        TORCHPLUG_FOO_DEVICE_MEMORY="lots",
    )
    message = line(result, "init:")
    assert "Cannot read 'lots' as a size" in message
    assert not DOUBLED_PERIOD.search(message), message
    assert message.endswith("Run `torchplug doctor` for details.")


def test_checkpoint_of_an_inactive_device_has_single_periods(tmp_path: Path) -> None:
    checkpoint = tmp_path / "npu.pt"
    run_case(
        f"import torch\ntorch.save(torch.ones(2, device='npu'), {str(checkpoint)!r})",
        devices=("npu",),
        TORCHPLUG_PRIVATEUSE1="npu",
    )
    result = run_case(
        f"""
import torch
try:
    torch.load({str(checkpoint)!r})
except RuntimeError as error:
    print("load:", error)
""",
        devices=("foo", "hpu"),
    )
    message = line(result, "load:")
    assert "PrivateUse1 belongs to 'foo'" in message
    assert not DOUBLED_PERIOD.search(message), message
