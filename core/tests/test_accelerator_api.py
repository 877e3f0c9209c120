"""torch.accelerator and the torch.cuda-shaped extras of the device module."""

import pytest
import torch


def test_torch_accelerator_answers_for_the_device(device: str) -> None:
    accelerator = torch.accelerator
    assert accelerator.is_available()
    assert accelerator.current_accelerator() == torch.device(device)
    assert accelerator.device_count() == torch.foo.device_count()
    previous = accelerator.current_device_index()
    accelerator.set_device_index(1)
    try:
        assert torch.foo.current_device() == 1
        assert torch.ones(1, device=device).device == torch.device(device, 1)
    finally:
        accelerator.set_device_index(previous)
    assert accelerator.current_stream().device_type == torch.foo.current_stream().device_type
    accelerator.synchronize()


def test_device_capability_lists_the_supported_dtypes(device: str) -> None:
    supported = torch.accelerator.get_device_capability()["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool} <= set(supported)
    with pytest.raises(RuntimeError, match=r"Invalid device|device index"):
        torch.accelerator.get_device_capability(7)


def test_out_of_memory_error_is_exposed_like_torch_cuda(device: str) -> None:
    assert torch.foo.OutOfMemoryError is torch.OutOfMemoryError
    with pytest.raises(torch.foo.OutOfMemoryError):
        torch.empty(1 << 45, dtype=torch.uint8, device=device)


def test_reset_max_memory_allocated(device: str) -> None:
    x = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    del x
    torch.foo.reset_max_memory_allocated()
    assert torch.foo.max_memory_allocated() == torch.foo.memory_allocated()
