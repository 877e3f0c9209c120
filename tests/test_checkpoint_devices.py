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


def test_disabled_backend_is_named_with_its_package(tmp_path: Path) -> None:
    path = tmp_path / "foo.pt"
    _save(path, "foo:1")
    strict, unpickled, cpu = _load(path, TORCHPLUG_DISABLE="foo")
    for line in (strict, unpickled):
        assert line.startswith("MissingDeviceError |"), line
        assert "'foo:1'" in line
        assert "torch_foo" in line
        assert "disabled by TORCHPLUG_DISABLE=foo" in line
        assert "map_location='cpu'" in line
    assert cpu == "cpu [0.0, 1.0, 2.0]"


def test_backend_without_privateuse1_says_how_to_select_it(
    tmp_path: Path, plugin_dir: PluginDir
) -> None:
    plugin_dir.add_torchplug_backend("torch_zed", "zed")
    path = tmp_path / "zed.pt"
    _save(path, "zed", plugins=plugin_dir, TORCHPLUG_PRIVATEUSE1="zed")
    strict, _, cpu = _load(path, plugins=plugin_dir)  # foo wins PrivateUse1 by name order
    assert strict.startswith("MissingDeviceError |")
    assert "torch_zed" in strict
    assert "TORCHPLUG_PRIVATEUSE1=zed" in strict
    assert cpu == "cpu [0.0, 1.0, 2.0]"


def test_device_of_an_uninstalled_backend(tmp_path: Path) -> None:
    path = tmp_path / "zed.pt"
    _save(path, "foo")
    # A checkpoint from a `zed` machine differs only in its location tags.
    path.write_bytes(path.read_bytes().replace(b"foo:0", b"zed:0"))
    strict, unpickled, cpu = _load(path)
    for line in (strict, unpickled):
        assert line.startswith("MissingDeviceError |"), line
        assert "no installed backend provides the 'zed' device" in line
        assert "map_location='cpu'" in line
    assert cpu == "cpu [0.0, 1.0, 2.0]"


def test_hpu_checkpoint_without_the_hpu_backend(tmp_path: Path) -> None:
    path = tmp_path / "hpu.pt"
    _save(path, "hpu")
    strict, _, cpu = _load(path, TORCHPLUG_DISABLE="hpu")
    assert strict.startswith("MissingDeviceError |")
    assert "vhabana_frameworks" in strict
    assert cpu == "cpu [0.0, 1.0, 2.0]"
