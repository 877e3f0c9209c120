"""torch.save / torch.load of device tensors and modules, with and without map_location."""

import io

import torch
from torch import nn

from torchplug_testing import device_api
from torchplug_testing.compare import assert_matches_cpu


def round_trip(value, **load_options):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_options)


def test_tensor_round_trip_keeps_device(device: str) -> None:
    tensor = torch.randn(3, 4).to(device)
    loaded = round_trip(tensor)
    assert loaded.device == tensor.device
    assert_matches_cpu(loaded, tensor)


def test_map_location(device: str) -> None:
    tensor = torch.arange(6.0).to(device)
    assert round_trip(tensor, map_location="cpu").device.type == "cpu"
    on_cpu = round_trip(torch.arange(6.0), map_location=device)
    assert on_cpu.device.type == device
    if (device_api.device_count(device) or 1) > 1:
        remapped = round_trip(tensor, map_location=f"{device}:1")
        assert remapped.device == torch.device(device, 1)
        assert_matches_cpu(remapped, torch.arange(6.0))


def test_shared_storage_survives(device: str) -> None:
    base = torch.arange(12.0).to(device)
    loaded_base, loaded_view = round_trip([base, base.view(3, 4)[1:]])
    loaded_view.fill_(-1)
    assert loaded_base.cpu()[4:].eq(-1).all()
    assert loaded_view.device == base.device


def test_state_dict_weights_only(device: str) -> None:
    torch.manual_seed(10)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).to(device)
    loaded = round_trip(model.state_dict(), weights_only=True)
    assert all(value.device.type == device for value in loaded.values())
    restored = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).to(device)
    restored.load_state_dict(loaded)
    batch = torch.randn(5, 4).to(device)
    assert_matches_cpu(restored.eval()(batch), model.eval()(batch))
