"""scaled_dot_product_attention on the devices: the CPU's fused kernel where torch lets a device choose."""

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile

from device_matrix import active_devices, rerun_as_owner, with_backward

DEVICES = active_devices()
# torch asks only PrivateUse1 devices (and its own) which fused kernel to run;
# on hpu it runs the math decomposition, equal to the CPU's within rounding.
CHOOSES_FUSED_KERNEL = {"foo", "npu"}

CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "boolean mask": {
        "attn_mask": torch.rand(8, 8, generator=torch.Generator().manual_seed(1)) > 0.3
    },
    "additive mask": {
        "attn_mask": torch.randn(1, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    },
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("device", with_backward(DEVICES))
def test_attention_forward_and_backward_equal_the_cpu(device: str, case: str) -> None:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 16, generator=generator, requires_grad=True) for _ in range(3))
    options = CASES[case]
    expected = F.scaled_dot_product_attention(q, k, v, **options)
    expected.square().sum().backward()

    on_device = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    device_options = {
        name: value.to(device) if torch.is_tensor(value) else value
        for name, value in options.items()
    }
    with profile() as trace:
        result = F.scaled_dot_product_attention(*on_device, **device_options)
    result.square().sum().backward()

    exact = device in CHOOSES_FUSED_KERNEL
    tolerance = {"rtol": 0, "atol": 0} if exact else {"rtol": 1e-5, "atol": 1e-5}
    torch.testing.assert_close(result.cpu(), expected, **tolerance)
    for cpu_input, device_input in zip((q, k, v), on_device, strict=True):
        torch.testing.assert_close(device_input.grad.cpu(), cpu_input.grad, **tolerance)
    fused = any("flash_attention" in event.name for event in trace.events())
    assert fused == exact


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
