"""torch.save / torch.load of device tensors and state dicts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torchplug import serialization


def _checkpoint(device: str) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).to(f"{device}:1")
    return {
        "model": model.state_dict(),
        "tensor": torch.arange(6.0, device=f"{device}:0").reshape(2, 3),
        "view": torch.arange(10, device=f"{device}:0")[2:8:2],
        "step": 7,
    }


@pytest.mark.parametrize("weights_only", [True, False])
def test_round_trip_keeps_devices_and_values(
    device: str, tmp_path: Path, weights_only: bool
) -> None:
    saved = _checkpoint(device)
    path = tmp_path / "ckpt.pt"
    torch.save(saved, path)
    loaded = torch.load(path, weights_only=weights_only)
    assert loaded["step"] == 7
    assert loaded["tensor"].device == torch.device(device, 0)
    assert loaded["view"].device == torch.device(device, 0)
    assert loaded["view"].cpu().tolist() == [2, 4, 6]
    for name, value in saved["model"].items():
        assert loaded["model"][name].device == torch.device(device, 1), name
        assert torch.equal(loaded["model"][name].cpu(), value.cpu()), name


@pytest.mark.parametrize(
    ("map_location", "expected"),
    [
        ("cpu", "cpu"),
        ("foo:1", "foo:1"),
        (torch.device("foo", 0), "foo:0"),
        ({"foo:1": "cpu"}, None),
    ],
)
def test_map_location(
    device: str, tmp_path: Path, map_location: object, expected: str | None
) -> None:
    saved = _checkpoint(device)
    path = tmp_path / "ckpt.pt"
    torch.save(saved, path)
    loaded = torch.load(path, map_location=map_location, weights_only=True)
    if expected is None:  # only foo:1 remapped
        assert loaded["model"]["0.weight"].device.type == "cpu"
        assert loaded["tensor"].device == torch.device(device, 0)
    else:
        assert loaded["tensor"].device == torch.device(expected)
        assert loaded["model"]["0.weight"].device == torch.device(expected)
    assert torch.equal(loaded["tensor"].cpu(), saved["tensor"].cpu())


def test_state_dict_loads_into_a_model_on_the_device(device: str, tmp_path: Path) -> None:
    source = torch.nn.Linear(3, 2).to(device)
    path = tmp_path / "sd.pt"
    torch.save(source.state_dict(), path)
    target = torch.nn.Linear(3, 2).to(device)
    target.load_state_dict(torch.load(path, weights_only=True))
    x = torch.randn(4, 3, device=device)
    assert torch.equal(target(x).cpu(), source(x).cpu())


def test_cpu_checkpoint_maps_onto_the_device(device: str, tmp_path: Path) -> None:
    path = tmp_path / "cpu.pt"
    torch.save({"x": torch.ones(3)}, path)
    loaded = torch.load(path, map_location=device, weights_only=True)
    assert loaded["x"].device == torch.device(device, 0)


def test_out_of_range_device_index_names_the_count(device: str, tmp_path: Path) -> None:
    path = tmp_path / "ckpt.pt"
    torch.save(torch.ones(2, device=device), path)
    with pytest.raises(RuntimeError, match=r"device_count\(\) is 2"):
        torch.load(path, map_location=f"{device}:5", weights_only=True)


def test_unknown_device_names_it_and_suggests_cpu(device: str, tmp_path: Path) -> None:
    path = tmp_path / "ckpt.pt"
    torch.save(torch.ones(2, device=device), path)
    # What a checkpoint written on a device whose backend is absent here looks like.
    path.write_bytes(path.read_bytes().replace(b"foo:0", b"zzz:0"))
    with pytest.raises(serialization.MissingDeviceError) as error:
        torch.load(path, weights_only=True)
    message = str(error.value)
    assert "'zzz:0'" in message
    assert "no installed backend provides the 'zzz' device" in message
    assert "map_location='cpu'" in message
    assert torch.load(path, map_location="cpu", weights_only=True).tolist() == [1.0, 1.0]
