"""The out= sweep's verdict: a refusal naming the devices that writes nothing passes;
an accepted host out=, a refusal that names no device, or a write before refusing fails."""

from __future__ import annotations

import pytest
import torch

from torchplug_testing import out_device


def refuses(message: str, write: bool = False):
    def op(sample_input: torch.Tensor, *, out: torch.Tensor) -> None:
        if write:
            out.zero_()
        raise RuntimeError(message)

    return op


def accepts(sample_input: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return out.copy_(sample_input)


def host_out() -> torch.Tensor:
    return out_device._host_outputs(torch.ones(3))


def test_a_refusal_naming_the_devices_passes() -> None:
    out_device._check_refused(
        refuses("Expected all tensors on the same Device"), (torch.ones(3), (), {}), host_out()
    )


@pytest.mark.parametrize(
    ("op", "complaint"),
    [
        (accepts, "was accepted"),
        (refuses("bad shape"), "without naming the devices"),
        (refuses("wrong device", write=True), "wrote its out="),
    ],
)
def test_what_cuda_would_not_do_fails(op, complaint: str) -> None:
    with pytest.raises(AssertionError, match=complaint):
        out_device._check_refused(op, (torch.ones(3), (), {}), host_out())


def test_every_operator_with_an_out_overload_is_swept_once() -> None:
    chosen = out_device.operators()
    assert all(op.supports_out for op, _ in chosen)
    names = [(op.name, op.variant_test_name) for op, _ in chosen]
    assert len(names) == len(set(names))
    assert {"add", "cumsum", "nonzero", "mm"} <= {name for name, _ in names}
