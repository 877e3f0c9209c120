"""Every argument the device module accepts is honoured or refused with a clear error."""

import time

import pytest
import torch


def test_blocking_event_makes_the_host_wait_for_the_device(device: str) -> None:
    stream = torch.foo.Stream()
    with torch.foo.stream(stream):
        torch.foo._sleep(100)
        event = torch.foo.Event(blocking=True)
        event.record()
    started = time.perf_counter()
    event.synchronize()
    assert time.perf_counter() - started >= 0.09
    assert event.query()


def test_interprocess_event_is_refused_naming_what_is_shared(device: str) -> None:
    with pytest.raises(NotImplementedError, match=r"interprocess=True.*torchplug\.ipc"):
        torch.foo.Event(interprocess=True)


def test_timing_event_measures(device: str) -> None:
    start, end = torch.foo.Event(enable_timing=True), torch.foo.Event(enable_timing=True)
    start.record()
    torch.foo._sleep(50)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 45


def test_a_peer_device_must_be_named(device: str) -> None:
    assert torch.foo.can_device_access_peer(None, 1)
    assert torch.foo.can_device_access_peer("foo:1", torch.device("foo", 0))
    for unnamed in (None, "foo", torch.device("foo")):
        with pytest.raises(ValueError, match="with a specified index or an integer"):
            torch.foo.can_device_access_peer(0, unnamed)
    with pytest.raises(RuntimeError, match="Invalid device index 7"):
        torch.foo.can_device_access_peer(0, 7)


def test_a_device_without_index_means_the_current_one(device: str) -> None:
    with torch.foo.device(1):
        assert torch.foo.get_device_name("foo") == "torchplug simulated foo 1"
        assert torch.foo.get_device_name(None) == "torchplug simulated foo 1"
    with pytest.raises(ValueError, match="Expected a foo device"):
        torch.foo.get_device_name("cpu")


def test_abbreviated_summary_is_the_summary(device: str) -> None:
    assert torch.foo.memory_summary(abbreviated=True) == torch.foo.memory_summary()
