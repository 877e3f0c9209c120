"""Streams and events: ordering, waiting, querying and timing through public torch APIs."""

import torch


def heavy(x: torch.Tensor, rounds: int = 8) -> torch.Tensor:
    for _ in range(rounds):
        x = torch.tanh(x @ x) * 0.5
    return x


def test_current_and_default_streams(device: str, device_module) -> None:
    current = device_module.current_stream()
    assert current.device.type == device
    stream = torch.Stream(device=device)
    assert stream.device.type == device
    assert stream != current
    with device_module.stream(stream):
        assert device_module.current_stream() == stream
    assert device_module.current_stream() == current


def test_side_stream_ordering(device: str, device_module) -> None:
    host = torch.randn(128, 128) / 16
    expected = heavy(host)
    stream = torch.Stream(device=device)
    source = host.to(device)
    stream.wait_stream(device_module.current_stream())
    with device_module.stream(stream):
        result = heavy(source)
        done = torch.Event(device=device)
        done.record(stream)
    device_module.current_stream().wait_event(done)
    copied = result.cpu()  # ordered after the side stream by the wait
    assert torch.allclose(copied, expected, rtol=1e-5, atol=1e-6)
    stream.synchronize()
    assert stream.query()


def test_event_semantics(device: str) -> None:
    start = torch.Event(device=device, enable_timing=True)
    end = torch.Event(device=device, enable_timing=True)
    start.record()
    heavy(torch.randn(128, 128, device=device) / 16)
    end.record()
    end.synchronize()
    assert start.query()
    assert end.query()
    assert start.elapsed_time(end) >= 0


def test_synchronize_drains_every_stream(device: str, device_module) -> None:
    streams = [torch.Stream(device=device) for _ in range(3)]
    results = []
    for stream in streams:
        with device_module.stream(stream):
            results.append(heavy(torch.eye(64, device=device)))
    device_module.synchronize()
    assert all(stream.query() for stream in streams)
    assert all(torch.isfinite(result.cpu()).all() for result in results)


def test_stream_on_second_device(device: str, second_device: torch.device, device_module) -> None:
    stream = torch.Stream(device=second_device)
    assert stream.device == second_device
    before = device_module.current_device()
    with device_module.device(1):
        assert device_module.current_device() == 1
        assert torch.ones(1, device=device).device == second_device
    assert device_module.current_device() == before
