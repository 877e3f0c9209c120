"""Loading a checkpoint whose device is missing here says which and how to load it anyway."""

from __future__ import annotations

from pathlib import Path

from fresh_interpreter import PluginDir, run_python

SAVE = """
import torch
torch.save({{"w": torch.arange(3.0).to("{device}")}}, r"{path}")
"""

LOAD = """
import torch
for weights_only in (True, False):
    try:
        torch.load(r"{path}", weights_only=weights_only)
        print("loaded")
    except Exception as error:
        print(type(error).__name__, "|", error)
print("cpu", torch.load(r"{path}", map_location="cpu", weights_only=True)["w"].tolist())
"""


def ok(result) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def _save(path: Path, device: str, **env: str) -> None:
    ok(run_python(SAVE.format(device=device, path=path), **env))


def _load(path: Path, **kwargs) -> list[str]:
    return ok(run_python(LOAD.format(path=path), **kwargs)).splitlines()


def assert_missing_device(lines: tuple[str, ...], *fragments: str) -> None:
    """Each of ``lines`` reports a MissingDeviceError naming ``fragments`` and the way out."""
    for line in lines:
        assert line.startswith("MissingDeviceError |"), line
        for fragment in (*fragments, "map_location='cpu'"):
            assert fragment in line, line


def test_disabled_backend_is_named_with_its_package(tmp_path: Path) -> None:
    path = tmp_path / "foo.pt"
    _save(path, "foo:1")
    strict, unpickled, cpu = _load(path, TORCHPLUG_DISABLE="foo")
    assert_missing_device(
        (strict, unpickled), "'foo:1'", "torch_foo", "disabled by TORCHPLUG_DISABLE=foo"
    )
    assert cpu == "cpu [0.0, 1.0, 2.0]"


def test_backend_without_privateuse1_says_how_to_select_it(
    tmp_path: Path, plugin_dir: PluginDir
) -> None:
    plugin_dir.add_torchplug_backend("torch_zed", "zed")
    path = tmp_path / "zed.pt"
    _save(path, "zed", plugins=plugin_dir, TORCHPLUG_PRIVATEUSE1="zed")
    strict, _, cpu = _load(path, plugins=plugin_dir)  # foo wins PrivateUse1 by name order
    assert_missing_device((strict,), "torch_zed", "TORCHPLUG_PRIVATEUSE1=zed")
    assert cpu == "cpu [0.0, 1.0, 2.0]"


def test_device_of_an_uninstalled_backend(tmp_path: Path) -> None:
    path = tmp_path / "zed.pt"
    _save(path, "foo")
    # A checkpoint from a `zed` machine differs only in its location tags.
    path.write_bytes(path.read_bytes().replace(b"foo:0", b"zed:0"))
    strict, unpickled, cpu = _load(path)
    assert_missing_device((strict, unpickled), "no installed backend provides the 'zed' device")
    assert cpu == "cpu [0.0, 1.0, 2.0]"


def test_hpu_checkpoint_without_the_hpu_backend(tmp_path: Path) -> None:
    path = tmp_path / "hpu.pt"
    _save(path, "hpu")
    strict, _, cpu = _load(path, TORCHPLUG_DISABLE="hpu")
    assert_missing_device((strict,), "vhabana_frameworks")
    assert cpu == "cpu [0.0, 1.0, 2.0]"
