"""Views and strides: shapes, strides, offsets and storage sharing match the CPU."""

import pytest
import torch

VIEWS = {
    "view": lambda x: x.view(6, 20),
    "reshape_of_transpose": lambda x: x.transpose(0, 2).reshape(-1),
    "transpose": lambda x: x.transpose(1, 2),
    "permute": lambda x: x.permute(2, 0, 1),
    "narrow": lambda x: x.narrow(2, 1, 3),
    "select": lambda x: x.select(1, 2),
    "slice_step": lambda x: x[:, ::2, 1::3],
    "expand": lambda x: x[:, :1].expand(3, 2, 4, 5),
    "transpose_of_slice": lambda x: x[:, 3:7].transpose(0, 1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "diagonal": lambda x: x.diagonal(dim1=1, dim2=2),
    "unfold": lambda x: x.unfold(2, 2, 1),
    "as_strided": lambda x: x.as_strided((3, 3), (7, 2), 4),
    "unbind": lambda x: x.unbind(1)[1],
    "split": lambda x: x.split(2, dim=2)[1],
    "view_as_real": lambda x: torch.view_as_real(x.to(torch.complex64)),
}


def describe(tensor: torch.Tensor) -> tuple:
    return tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), tensor.is_contiguous()


@pytest.mark.parametrize("name", VIEWS)
def test_view_metadata_and_values(device: str, name: str) -> None:
    base = torch.arange(120.0).reshape(2, 12, 5)
    expected = VIEWS[name](base)
    actual = VIEWS[name](base.to(device))
    if name != "view_as_real":  # a complex copy first; its metadata is the copy's
        assert describe(actual) == describe(expected)
    assert torch.equal(actual.cpu(), expected)


def test_views_share_storage(device: str) -> None:
    base = torch.zeros(4, 6, device=device)
    view = base.t()[1:3]
    view.fill_(5)
    assert base.untyped_storage().data_ptr() == view.untyped_storage().data_ptr()
    expected = torch.zeros(4, 6)
    expected.t()[1:3] = 5
    assert torch.equal(base.cpu(), expected)
    assert view._base is base


def test_contiguous_and_memory_formats(device: str) -> None:
    host = torch.randn(2, 3, 4, 5)
    channels_last = host.to(device).contiguous(memory_format=torch.channels_last)
    assert channels_last.stride() == host.contiguous(memory_format=torch.channels_last).stride()
    assert channels_last.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(channels_last.cpu(), host)
    flipped = host.to(device).permute(3, 1, 0, 2).contiguous()
    assert flipped.stride() == host.permute(3, 1, 0, 2).contiguous().stride()


def test_resize_and_set(device: str) -> None:
    tensor = torch.arange(6.0, device=device)
    tensor.resize_(2, 2)
    assert tensor.shape == (2, 2)
    assert tensor.cpu().flatten().tolist() == [0.0, 1.0, 2.0, 3.0]
    other = torch.arange(10.0, device=device)
    tensor.set_(other.untyped_storage(), 2, (2, 3), (3, 1))
    assert torch.equal(tensor.cpu(), torch.arange(10.0).as_strided((2, 3), (3, 1), 2))
