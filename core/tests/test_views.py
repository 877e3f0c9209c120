"""Views with storage offsets, overlapping strides and expansion behave as on the CPU."""

import pytest
import torch

from device_matrix import active_devices, rerun_as_owner

DEVICES = active_devices()


def on_both(device: str, make, action):
    """`action` applied to `make()` on the CPU and on the device: both results, or both errors."""
    results = []
    for where in ("cpu", device):
        base = make().to(where)
        try:
            results.append(action(base))
        except RuntimeError as error:
            results.append(error)
    return results


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(lambda t: t.as_strided((2, 2), (1, 2), 3), id="offset"),
        pytest.param(lambda t: t.as_strided((3, 3), (1, 1), 1), id="overlapping"),
        pytest.param(lambda t: t.as_strided((4,), (0,), 5), id="zero-stride"),
        pytest.param(lambda t: t.unfold(0, 4, 2), id="unfold"),
        pytest.param(lambda t: t.view(3, 4).diagonal(offset=1), id="diagonal"),
        pytest.param(lambda t: t[2:].view(2, 5).t(), id="transposed-slice"),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_views_read_the_cpus_values(device: str, view) -> None:
    base = torch.arange(12.0)
    on_device = view(base.to(device))
    expected = view(base)
    assert on_device.stride() == expected.stride()
    assert on_device.storage_offset() == expected.storage_offset()
    torch.testing.assert_close(on_device.cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close((on_device * 2).cpu(), expected * 2, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_writes_through_views_reach_the_base(device: str) -> None:
    def write(base: torch.Tensor) -> torch.Tensor:
        base.as_strided((2, 2), (1, 3), 2).add_(100)
        base.unfold(0, 3, 3)[:, 1].mul_(-1)
        base.view(3, 4).diagonal().fill_(7)
        return base.cpu()

    on_cpu, on_device = on_both(device, lambda: torch.arange(12.0), write)
    torch.testing.assert_close(on_device, on_cpu, rtol=0, atol=0)


@pytest.mark.parametrize(
    "action",
    [
        pytest.param(lambda t: t.expand(3, 4).add_(1), id="expand-add_"),
        pytest.param(lambda t: t.as_strided((3, 3), (1, 1)).mul_(2), id="overlap-mul_"),
        pytest.param(
            lambda t: t.as_strided((2, 2), (0, 1)).copy_(torch.ones(2, 2, device=t.device)),
            id="overlap-copy_",
        ),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_illegal_in_place_on_overlapping_memory_raises_the_cpus_error(device: str, action) -> None:
    on_cpu, on_device = on_both(device, lambda: torch.arange(4.0), action)
    assert isinstance(on_cpu, RuntimeError)
    assert isinstance(on_device, RuntimeError), on_device
    assert str(on_device).split("\n")[0] == str(on_cpu).split("\n")[0]


@pytest.mark.parametrize("device", DEVICES)
def test_expanded_operands_broadcast_like_the_cpu(device: str) -> None:
    row = torch.arange(4.0)
    column = torch.arange(3.0).unsqueeze(1)
    expected = row.expand(3, 4) + column.expand(3, 4)
    result = row.to(device).expand(3, 4) + column.to(device).expand(3, 4)
    torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)
    target = torch.zeros(3, 4)
    target.add_(row.expand(3, 4))
    on_device = torch.zeros(3, 4, device=device)
    on_device.add_(row.to(device).expand(3, 4))
    torch.testing.assert_close(on_device.cpu(), target, rtol=0, atol=0)


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
