"""Caching allocator statistics, OOM and recovery, fault injection, pinned memory."""

import copy
import gc

import pytest
import torch


def test_allocator_stats_track_tensors(device: str) -> None:
    torch.foo.empty_cache()
    torch.foo.reset_peak_memory_stats()
    start = torch.foo.memory_allocated()
    x = torch.empty(1 << 20, dtype=torch.uint8, device=device)  # 1 MiB
    assert torch.foo.memory_allocated() - start >= 1 << 20
    assert torch.foo.memory_reserved() >= torch.foo.memory_allocated()
    peak = torch.foo.max_memory_allocated()
    del x
    assert torch.foo.memory_allocated() == start
    assert torch.foo.max_memory_allocated() == peak  # peak survives the free
    assert torch.foo.memory_reserved() > 0  # kept cached
    torch.foo.empty_cache()
    stats = torch.foo.memory_stats()
    assert stats["reserved_bytes.all.current"] == stats["allocated_bytes.all.current"]
    torch.foo.reset_peak_memory_stats()
    assert torch.foo.max_memory_allocated() == torch.foo.memory_allocated()


def test_torch_accelerator_memory_api(device: str) -> None:
    assert torch.accelerator.current_accelerator().type == device
    x = torch.empty(256, 1024, device=device)
    assert torch.accelerator.memory_allocated() >= x.nbytes
    assert torch.accelerator.max_memory_allocated() >= x.nbytes
    assert torch.accelerator.memory_reserved() >= x.nbytes
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] >= x.nbytes
    free, total = torch.accelerator.get_memory_info()
    assert total == torch.foo.get_device_properties().total_memory
    assert 0 < free < total
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.empty_cache()


def test_fallback_outputs_are_counted(device: str) -> None:
    a = torch.randn(512, 512, device=device)
    before = torch.foo.memory_allocated()
    b = a * 2  # a CPU kernel's output taken over as device memory
    assert torch.foo.memory_allocated() - before >= b.nbytes
    del b
    assert torch.foo.memory_allocated() == before


def test_out_of_memory_message_and_recovery(device: str) -> None:
    total = torch.foo.get_device_properties().total_memory
    with pytest.raises(torch.OutOfMemoryError) as caught:
        torch.empty(total + (1 << 20), dtype=torch.uint8, device=device)
    message = str(caught.value)
    assert "Tried to allocate" in message
    assert "is free" in message
    assert "TORCHPLUG_DEVICE_MEMORY" in message
    assert torch.foo.memory_stats()["num_ooms"] >= 1
    # The process keeps working: a retry that fits succeeds.
    y = torch.ones(1024, device=device)
    assert y.sum().item() == 1024


def test_fault_injection_makes_next_allocations_fail(device: str) -> None:
    from torchplug.runtime import inject_allocation_failures

    torch.foo.empty_cache()
    inject_allocation_failures(f"{device}:0", 1)
    with pytest.raises(torch.OutOfMemoryError, match="failure injected"):
        torch.empty(4096, device=device)
    assert torch.empty(4096, device=device).numel() == 4096


def test_pinned_memory(device: str) -> None:
    host = torch.randn(1024).pin_memory()
    assert host.is_pinned()
    assert not torch.randn(4).is_pinned()
    dev = host.to(device, non_blocking=True)
    torch.foo.synchronize()
    assert torch.equal(dev.cpu(), host)
    del host
    torch.accelerator.empty_host_cache()


def test_host_memory_stats(device: str) -> None:
    module = getattr(torch, device)
    torch.accelerator.empty_host_cache()
    module.reset_peak_host_memory_stats()
    module.reset_accumulated_host_memory_stats()
    before = module.host_memory_stats()
    assert before["num_host_alloc"] == 0
    assert before["host_alloc_time.count"] == 0

    size = 3 << 20  # a size no other test pins, so the cache cannot serve it
    host = torch.empty(size, dtype=torch.uint8).pin_memory()
    pinned = module.host_memory_stats()
    assert pinned["num_host_alloc"] == 1
    assert pinned["host_alloc_time.count"] == 1
    assert pinned["active_requests.current"] == before["active_requests.current"] + 1
    assert pinned["active_bytes.current"] == before["active_bytes.current"] + size
    assert pinned["allocated_bytes.current"] == before["allocated_bytes.current"] + size

    del host  # back to the cache: still allocated, no longer active
    cached = module.host_memory_stats()
    assert cached["active_bytes.current"] == before["active_bytes.current"]
    assert cached["allocated_bytes.current"] == pinned["allocated_bytes.current"]
    assert cached["active_bytes.peak"] >= size

    torch.accelerator.empty_host_cache()
    emptied = module.host_memory_stats_as_nested_dict()
    assert emptied["allocated_bytes"]["current"] == before["allocated_bytes.current"]
    assert emptied["num_host_free"] >= 1
    assert emptied["host_free_time"]["count"] == emptied["num_host_free"]

    module.reset_peak_host_memory_stats()
    after = module.host_memory_stats()
    assert after["active_bytes.peak"] == after["active_bytes.current"] < size


def test_cuda_compatible_memory_queries(device: str) -> None:
    module = getattr(torch, device)
    block = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    # A device tensor an earlier test left in garbage (a reference cycle) is
    # freed whenever the collector runs, and building the nested dict can run
    # it: collect first, and not between the two reads.
    gc.collect()
    gc.disable()
    try:
        nested = module.memory_stats_as_nested_dict()
        allocated = module.memory_allocated()
    finally:
        gc.enable()
    assert nested["allocated_bytes"]["all"]["current"] == allocated
    assert module.device_memory_used() == module.mem_get_info()[1] - module.mem_get_info()[0]
    assert module.device_memory_used() >= block.numel()
    with pytest.warns(FutureWarning, match="renamed to torch.foo.memory_reserved"):
        assert module.memory_cached() == module.memory_reserved()
    with pytest.warns(FutureWarning, match="max_memory_reserved"):
        assert module.max_memory_cached() == module.max_memory_reserved()
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        module.reset_max_memory_cached()
    assert module.can_device_access_peer(0, 1)
    with pytest.raises(RuntimeError, match="Invalid device index 7 for 'foo': there are 2 devices"):
        module.can_device_access_peer(0, 7)


def test_per_process_memory_fraction_caps_reservations(device: str) -> None:
    module = getattr(torch, device)
    capacity = module.mem_get_info(1)[1]
    assert module.get_per_process_memory_fraction(1) == 1.0
    module.empty_cache()
    module.set_per_process_memory_fraction(0.25, 1)
    try:
        kept = torch.empty(capacity // 8, dtype=torch.uint8, device=f"{device}:1")
        with pytest.raises(
            torch.OutOfMemoryError,
            match=r"foo:1 out of memory: tried to allocate .* per-process memory fraction 0\.25 "
            r".*torch\.foo\.set_per_process_memory_fraction",
        ):
            torch.empty(capacity // 5, dtype=torch.uint8, device=f"{device}:1")
        del kept
        # Freed memory counts again, and the cache is given back before refusing.
        torch.empty(capacity // 5, dtype=torch.uint8, device=f"{device}:1")
        # Operator outputs taken over from CPU kernels are capped too.
        with pytest.raises(torch.OutOfMemoryError, match="per-process memory fraction"):
            torch.ones(capacity // 4, dtype=torch.uint8, device=f"{device}:1").sin()
    finally:
        module.set_per_process_memory_fraction(1.0, 1)
    with pytest.raises(ValueError, match=r"Invalid fraction value: 1\.5\. Allowed range: 0~1"):
        module.set_per_process_memory_fraction(1.5)
    torch.empty(capacity // 2, dtype=torch.uint8, device=f"{device}:1")


def test_host_buffers_of_queued_kernels_are_cached_until_empty_cache(device: str) -> None:
    """The CPU code of a queued kernel allocates its large host buffers (here
    the weight gradient before it is copied into device memory) from a cache
    that keeps them mapped between steps; the host's own allocations never
    enter it, and empty_cache frees it."""
    import torchplug.runtime

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(512, 512, 3, padding=1)
    on_device = copy.deepcopy(conv).to(device)
    inputs = torch.randn(2, 512, 4, 4)
    conv(inputs).square().sum().backward()
    torch.foo.synchronize()
    torch.foo.empty_cache()
    assert torchplug.runtime.worker_scratch_bytes() == 0
    for _ in range(2):  # an operator queues once a call of its shapes has run
        on_device.zero_grad()
        on_device(inputs.to(device)).square().sum().backward()
    torch.foo.synchronize()
    assert torch.equal(on_device.weight.grad.cpu(), conv.weight.grad)
    if torchplug.runtime.launch_blocking():  # every kernel ran on this thread: nothing to cache
        assert torchplug.runtime.worker_scratch_bytes() == 0
    else:
        assert torchplug.runtime.worker_scratch_bytes() >= conv.weight.nbytes
    torch.foo.empty_cache()
    assert torchplug.runtime.worker_scratch_bytes() == 0
    host_buffer = torch.ones(1 << 22)  # 16 MiB allocated and freed by the host thread
    del host_buffer
    assert torchplug.runtime.worker_scratch_bytes() == 0
