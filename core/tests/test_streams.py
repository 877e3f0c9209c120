"""Streams run their work asynchronously and in order; events order and time it;
the sync debug mode flags host waits."""

import time
import warnings
from collections.abc import Iterator

import pytest
import torch


def test_stream_work_is_asynchronous_and_ordered(device: str) -> None:
    stream = torch.foo.Stream()
    with torch.foo.stream(stream):
        started = time.perf_counter()
        torch.foo._sleep(200)
        assert time.perf_counter() - started < 0.1  # queued, not run on the host
        assert not stream.query()
        stream.synchronize()
    assert time.perf_counter() - started >= 0.19
    assert stream.query()


def test_streams_overlap(device: str) -> None:
    first, second = torch.foo.Stream(), torch.foo.Stream()
    assert first.stream_id != second.stream_id
    started = time.perf_counter()
    for stream in (first, second):
        with torch.foo.stream(stream):
            torch.foo._sleep(200)
    torch.foo.synchronize()
    elapsed = time.perf_counter() - started
    assert 0.19 <= elapsed < 0.35  # concurrently, not 0.4 s back to back


def test_events_time_and_wait(device: str) -> None:
    stream = torch.foo.Stream()
    start, end = (
        torch.Event(device=device, enable_timing=True),
        torch.Event(device=device, enable_timing=True),
    )
    with torch.foo.stream(stream):
        start.record()
        torch.foo._sleep(50)
        end.record()
    assert not end.query()
    end.synchronize()
    assert end.query()
    assert 45 <= start.elapsed_time(end) < 500

    # A second stream waits for the first through an event.
    producer, consumer = torch.foo.Stream(), torch.foo.Stream()
    with torch.foo.stream(producer):
        torch.foo._sleep(100)
        ready = torch.Event(device=device)
        ready.record()
    consumer.wait_event(ready)
    began = time.perf_counter()
    consumer.synchronize()
    assert time.perf_counter() - began >= 0.08


def test_kernels_follow_stream_order(device: str) -> None:
    stream = torch.foo.Stream()
    host = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    with torch.foo.stream(stream):
        torch.foo._sleep(50)
        dev = host.to(device, non_blocking=True)  # queued after the sleep
        total = dev.sum()  # a kernel on the same stream waits for the copy
    torch.foo.current_stream().wait_stream(stream)  # item() reads on the default stream
    assert total.item() == float(host.sum())


def test_non_blocking_copy_is_asynchronous(device: str) -> None:
    host = torch.ones(1 << 22).pin_memory()
    with torch.foo.stream(torch.foo.Stream()):
        torch.foo._sleep(100)
        started = time.perf_counter()
        dev = host.to(device, non_blocking=True)
        assert time.perf_counter() - started < 0.05
        back = torch.empty_like(host).pin_memory()
        back.copy_(dev, non_blocking=True)
        torch.foo.current_stream().synchronize()
    assert torch.equal(back, host)


def test_blocking_copies_of_pinned_memory_wait_for_the_stream(device: str) -> None:
    """The driver copies pinned memory on the current stream (as cudaMemcpy
    does): a blocking copy returns once the copy, and what was queued before
    it, ran; and it is a synchronizing operation for sync-debug mode."""
    host = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    with torch.foo.stream(torch.foo.Stream()):
        torch.foo._sleep(50)
        started = time.perf_counter()
        dev = host.to(device)  # waits behind the sleep
        assert time.perf_counter() - started >= 0.04
        dev.mul_(2)  # queued on the same stream
        back = torch.empty_like(host).pin_memory()
        back.copy_(dev)  # waits for mul_ before returning
    assert torch.equal(back, host * 2)
    torch.foo.set_sync_debug_mode("warn")
    try:
        with pytest.warns(UserWarning, match="synchroniz"):
            back.copy_(dev)
    finally:
        torch.foo.set_sync_debug_mode("default")


def test_accelerator_stream_api(device: str) -> None:
    stream = torch.Stream(device=device)  # index -1 becomes the current device
    assert stream.device_index == torch.foo.current_device()
    previous = torch.accelerator.current_stream()
    torch.accelerator.set_stream(stream)
    assert torch.accelerator.current_stream() == stream
    torch.accelerator.set_stream(previous)
    torch.accelerator.synchronize()
    assert torch.accelerator.device_count() == torch.foo.device_count()
    with torch.foo.device(1):
        assert torch.accelerator.current_device_index() == 1
    assert torch.foo.current_device() == 0


def test_record_stream_delays_reuse(device: str) -> None:
    side = torch.foo.Stream()
    x = torch.empty(1 << 16, device=device)
    pointer = x.data_ptr()
    with torch.foo.stream(side):
        torch.foo._sleep(100)
    x.record_stream(side)
    del x
    y = torch.empty(1 << 16, device=device)
    assert y.data_ptr() != pointer  # still in use by the side stream's work
    side.synchronize()


def test_stream_context_class(device: str) -> None:
    side = torch.foo.Stream()
    before = torch.foo.current_stream()
    with torch.foo.StreamContext(side):
        assert torch.foo.current_stream() == side
    assert torch.foo.current_stream() == before
    with torch.foo.StreamContext(None):
        assert torch.foo.current_stream() == before
    assert torch.foo.is_current_stream_capturing() is False


@pytest.fixture
def sync_debug_mode() -> Iterator[None]:
    yield
    torch.foo.set_sync_debug_mode("default")


@pytest.mark.usefixtures("sync_debug_mode")
def test_sync_debug_mode_flags_host_waits(device: str) -> None:
    on_device = torch.arange(4.0, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert on_device.sum().item() == 6.0  # off by default: no warning

    torch.foo.set_sync_debug_mode("warn")
    assert torch.foo.get_sync_debug_mode() == 1
    assert torch.hpu.get_sync_debug_mode() == 0  # per device type
    with pytest.warns(UserWarning, match=r"synchronizing foo operation \(item\(\) on foo:0\)"):
        on_device.sum().item()
    with pytest.warns(UserWarning, match=r"Memcpy DtoH on foo:0"):
        on_device.cpu()
    with pytest.warns(UserWarning, match=r"Memcpy HtoD on foo:0"):
        torch.ones(4).to(device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pinned = torch.ones(4).pin_memory()
        (pinned.to(device, non_blocking=True) + on_device).mul_(2)  # no host wait

    torch.foo.set_sync_debug_mode(2)
    with pytest.raises(RuntimeError, match=r"set_sync_debug_mode\('default'\)"):
        on_device.cpu()
    torch.foo.set_sync_debug_mode("default")
    assert on_device.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="expected one of default, warn, error"):
        torch.foo.set_sync_debug_mode("loud")


def test_stream_context_switches_to_the_streams_device(device: str) -> None:
    """As with CUDA, work in the block runs on the stream's device."""
    assert torch.foo.current_device() == 0
    default_streams = [torch.foo.current_stream(i) for i in range(2)]
    remote = torch.foo.Stream(device=1)
    with torch.foo.stream(remote):
        assert torch.foo.current_device() == 1
        assert torch.foo.current_stream() == remote
        assert torch.ones(2, device=device).device.index == 1
    assert torch.foo.current_device() == 0
    assert [torch.foo.current_stream(i) for i in range(2)] == default_streams
    torch.foo.set_stream(remote)
    assert torch.foo.current_device() == 1
    torch.foo.set_stream(default_streams[0])
    assert torch.foo.current_device() == 0


def test_elapsed_time_refuses_events_of_two_devices(device: str) -> None:
    first, second = (torch.Event(device=f"{device}:{i}", enable_timing=True) for i in range(2))
    first.record(torch.foo.current_stream(0))
    second.record(torch.foo.current_stream(1))
    with pytest.raises(RuntimeError, match="recorded on devices 0 and 1"):
        first.elapsed_time(second)
    third = torch.Event(device=f"{device}:0", enable_timing=True)
    third.record(torch.foo.current_stream(0))
    assert first.elapsed_time(third) >= 0


def test_memory_pinned_for_one_device_is_pinned_for_all(device: str) -> None:
    """Pinned through the accelerator (foo), a non_blocking copy to hpu is asynchronous too."""
    if not (hasattr(torch, "hpu") and torch.hpu.is_available()):
        pytest.skip("hpu is not active here")
    host = torch.ones(1 << 20).pin_memory()
    with torch.hpu.stream(torch.hpu.Stream()):
        torch.hpu._sleep(100)
        started = time.perf_counter()
        on_hpu = host.to("hpu", non_blocking=True)
        assert time.perf_counter() - started < 0.05
        torch.hpu.current_stream().synchronize()
    assert torch.equal(on_hpu.cpu(), host)
