"""Recurrent modules on the devices: nn.LSTM, nn.GRU and their cells, forward and backward, equal the CPU's.

On a PrivateUse1 device torch runs LSTM and GRU cells as the fused cell
operators (``_thnn_fused_lstm_cell``, ``_thnn_fused_gru_cell`` and their
backwards: ``recurrent_kernels.cpp``), which compute the CPU's unfused cell math
step by step: a cell equals the CPU's bit for bit. A whole layer differs from the
CPU's in rounding only (the CPU projects the whole sequence at once, and its
float32 nn.LSTM is oneDNN's). hpu takes the CPU's own cell code.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils._python_dispatch import TorchDispatchMode

from device_matrix import active_devices, rerun_as_owner
from torchplug_testing.child import child_environment, run_python

DEVICES = active_devices()
FUSED_CELL_DEVICES = {"foo", "npu"}
DTYPES = (torch.float32, torch.float64)
# Layers: float32 matches the CPU within these (oneDNN's LSTM, whole-sequence GEMMs).
LAYER_TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.bfloat16: {"rtol": 5e-2, "atol": 5e-2},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}
EXACT = {"rtol": 0, "atol": 0}
# Autograd on hpu fails on CUDA builds of torch (an upstream limit; device_matrix.py):
# there the hpu tests compare the forward only.
NO_BACKWARD = {"hpu"} if torch.backends.cuda.is_built() else set()


class OperatorLog(TorchDispatchMode):
    """The ATen operators run under it (below autograd), with their outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        self.calls.append((func.overloadpacket.__name__, result))
        return result

    def names(self) -> set[str]:
        return {name for name, _ in self.calls}


def twin(factory, device: str, dtype: torch.dtype) -> tuple[nn.Module, nn.Module]:
    """The same module (same parameters) on the CPU and on the device."""
    torch.manual_seed(0)
    cpu = factory().to(dtype)
    torch.manual_seed(0)
    dev = factory().to(dtype).to(device)
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev


def to_device(value, device: str):
    if isinstance(value, tuple):
        return tuple(to_device(item, device) for item in value)
    return value.detach().to(device).requires_grad_(value.requires_grad)


def first_tensors(output) -> list[torch.Tensor]:
    """The tensors of a recurrent module's output: (out, h) or (out, (h, c)) or h or (h, c)."""
    if isinstance(output, torch.Tensor):
        return [output]
    flat = []
    for item in output:
        flat += first_tensors(item.data if hasattr(item, "batch_sizes") else item)
    return flat


def loss_of(tensors: list[torch.Tensor]) -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    weights = [torch.randn(t.shape, generator=generator).to(t) for t in tensors]
    return sum((t * w).sum() for t, w in zip(tensors, weights, strict=True))


def run(module: nn.Module, inputs: tuple, backward: bool) -> tuple[list, list]:
    outputs = first_tensors(module(*inputs))
    if not backward:
        return outputs, []
    loss_of(outputs).backward()
    leaves = [t for t in first_tensors(inputs) if t.requires_grad] + list(module.parameters())
    return outputs, [t.grad for t in leaves]


def assert_equal_to_cpu(factory, inputs, device, dtype, tolerance, backward=True) -> OperatorLog:
    backward = backward and device not in NO_BACKWARD
    cpu, dev = twin(factory, device, dtype)
    expected, expected_grads = run(cpu, inputs, backward)
    with OperatorLog() as log:
        actual, actual_grads = run(dev, to_device(inputs, device), backward)
    for produced, reference in zip(actual + actual_grads, expected + expected_grads, strict=True):
        assert produced.device.type == device
        torch.testing.assert_close(produced.cpu(), reference, **tolerance)
    return log


def cell_inputs(kind: str, dtype: torch.dtype, batch: int = 3, hidden: int = 5) -> tuple:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 4, generator=generator, dtype=dtype).requires_grad_()
    h = torch.randn(batch, hidden, generator=generator, dtype=dtype).requires_grad_()
    if kind == "lstm":
        c = torch.randn(batch, hidden, generator=generator, dtype=dtype).requires_grad_()
        return x, (h, c)
    return x, h


CELLS = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", CELLS)
@pytest.mark.parametrize("device", DEVICES)
def test_cell_equals_the_cpu_bit_for_bit(device, kind, dtype, bias) -> None:
    log = assert_equal_to_cpu(
        lambda: CELLS[kind](4, 5, bias=bias), cell_inputs(kind, dtype), device, dtype, EXACT
    )
    backward = (
        "_thnn_fused_lstm_cell_backward_impl" if kind == "lstm" else "_thnn_fused_gru_cell_backward"
    )
    fused = {f"_thnn_fused_{kind}_cell", backward}
    assert (log.names() & fused == fused) == (device in FUSED_CELL_DEVICES), log.names()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", CELLS)
@pytest.mark.parametrize("device", DEVICES)
def test_cell_forward_without_autograd(device, kind, dtype) -> None:
    """Unbatched input and no hidden state given (zeros), under no_grad."""
    x = torch.randn(4, generator=torch.Generator().manual_seed(3), dtype=dtype)
    with torch.no_grad():
        assert_equal_to_cpu(lambda: CELLS[kind](4, 5), (x,), device, dtype, EXACT, backward=False)


# name -> (module factory, input shape (seq, batch, features) before batch_first)
LAYERS = {
    "lstm": lambda: nn.LSTM(4, 6),
    "lstm_batch_first": lambda: nn.LSTM(4, 6, batch_first=True),
    "lstm_bidirectional_2_layers": lambda: nn.LSTM(4, 6, num_layers=2, bidirectional=True),
    "lstm_projections": lambda: nn.LSTM(4, 6, num_layers=2, proj_size=3),
    "lstm_no_bias": lambda: nn.LSTM(4, 6, bias=False),
    "gru": lambda: nn.GRU(4, 6),
    "gru_batch_first_bidirectional": lambda: nn.GRU(4, 6, batch_first=True, bidirectional=True),
    "gru_3_layers": lambda: nn.GRU(4, 6, num_layers=3),
    "gru_no_bias": lambda: nn.GRU(4, 6, bias=False),
}


def sequence(dtype: torch.dtype, batch_first: bool, steps: int = 5, batch: int = 3) -> torch.Tensor:
    shape = (batch, steps, 4) if batch_first else (steps, batch, 4)
    generator = torch.Generator().manual_seed(2)
    return torch.randn(shape, generator=generator, dtype=dtype).requires_grad_()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("device", DEVICES)
def test_layer_equals_the_cpu(device, layer, dtype) -> None:
    factory = LAYERS[layer]
    x = sequence(dtype, factory().batch_first)
    log = assert_equal_to_cpu(factory, (x,), device, dtype, LAYER_TOLERANCE[dtype])
    if device in FUSED_CELL_DEVICES:
        assert f"_thnn_fused_{layer.split('_')[0]}_cell" in log.names()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("device", DEVICES)
def test_given_hidden_state_and_its_gradient(device, kind) -> None:
    module = nn.LSTM if kind == "lstm" else nn.GRU
    generator = torch.Generator().manual_seed(4)
    h = torch.randn(4, 3, 6, generator=generator, dtype=torch.float64).requires_grad_()
    state = (h, torch.randn(4, 3, 6, generator=generator, dtype=torch.float64).requires_grad_())
    inputs = (sequence(torch.float64, False), state if kind == "lstm" else h)
    assert_equal_to_cpu(
        lambda: module(4, 6, num_layers=2, bidirectional=True),
        inputs,
        device,
        torch.float64,
        LAYER_TOLERANCE[torch.float64],
    )


class Packed(nn.Module):
    """A recurrent module over a packed batch of sequences of different lengths."""

    def __init__(self, inner: nn.Module, lengths: list[int]) -> None:
        super().__init__()
        self.inner = inner
        self.lengths = lengths

    def forward(self, padded: torch.Tensor):
        packed = pack_padded_sequence(
            padded, torch.tensor(self.lengths), batch_first=True, enforce_sorted=False
        )
        output, hidden = self.inner(packed)
        unpacked, _ = pad_packed_sequence(output, batch_first=True)
        return unpacked, hidden


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("device", DEVICES)
def test_packed_sequences(device, kind, dtype) -> None:
    module = nn.LSTM if kind == "lstm" else nn.GRU
    x = sequence(dtype, batch_first=True, steps=6, batch=4)
    assert_equal_to_cpu(
        lambda: Packed(
            module(4, 6, num_layers=2, bidirectional=True, batch_first=True), [3, 6, 1, 4]
        ),
        (x,),
        device,
        dtype,
        LAYER_TOLERANCE[dtype],
    )


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("device", DEVICES)
def test_dropout_between_layers_is_off_in_eval_mode(device, kind) -> None:
    module = nn.LSTM if kind == "lstm" else nn.GRU

    def factory() -> nn.Module:
        return module(4, 6, num_layers=3, dropout=0.5).eval()

    x = sequence(torch.float64, batch_first=False)
    log = assert_equal_to_cpu(factory, (x,), device, torch.float64, LAYER_TOLERANCE[torch.float64])
    assert not log.names() & {"native_dropout", "bernoulli_", "bernoulli"}


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("device", [name for name in DEVICES if name in FUSED_CELL_DEVICES])
def test_dropout_between_layers_in_train_mode(device, kind) -> None:
    """The device draws its own masks (its generator): they are checked statistically,
    and the device's result equals the CPU's layer by layer with the same masks.
    (PrivateUse1 devices: torch drops out through ``native_dropout`` on them.)"""
    p, layers, hidden = 0.4, 2, 64
    module = nn.LSTM if kind == "lstm" else nn.GRU
    x = sequence(torch.float64, batch_first=False, steps=8, batch=16)
    torch.manual_seed(0)
    stacked = module(4, hidden, num_layers=layers, dropout=p).double()
    singles = [module(4 if i == 0 else hidden, hidden).double() for i in range(layers)]
    for i, single in enumerate(singles):
        names = single.state_dict()
        single.load_state_dict({n: getattr(stacked, n.replace("_l0", f"_l{i}")) for n in names})
    dev = stacked.to(device)
    x_dev = to_device(x, device)
    with OperatorLog() as log:
        out_dev, _ = dev(x_dev)
    masks = [result[1].cpu() for name, result in log.calls if name == "native_dropout"]
    assert len(masks) == layers - 1
    kept = torch.cat([mask.flatten() for mask in masks]).double().mean().item()
    assert abs(kept - (1 - p)) < 0.03, f"kept {kept:.3f} of the activations, expected {1 - p}"
    # The same network on the CPU, applying the device's masks between the layers.
    expected = x
    for i, single in enumerate(singles):
        expected, _ = single(expected)
        if i < layers - 1:
            expected = expected * masks[i] * (1 / (1 - p))
    torch.testing.assert_close(out_dev.cpu(), expected, **LAYER_TOLERANCE[torch.float64])
    loss_of([out_dev]).backward()
    loss_of([expected]).backward()
    torch.testing.assert_close(x_dev.grad.cpu(), x.grad, **LAYER_TOLERANCE[torch.float64])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("device", DEVICES)
def test_reduced_precision_layers(device, kind, dtype) -> None:
    module = nn.LSTM if kind == "lstm" else nn.GRU
    assert_equal_to_cpu(
        lambda: module(4, 6, num_layers=2),
        (sequence(dtype, False),),
        device,
        dtype,
        LAYER_TOLERANCE[dtype],
    )


def test_bad_gate_shapes_say_what_fits() -> None:
    device = next((name for name in DEVICES if name in FUSED_CELL_DEVICES), None)
    if device is None:
        pytest.skip("no PrivateUse1 device is active in this process")
    gates = torch.zeros(2, 8, device=device)
    with pytest.raises(RuntimeError, match=r"do not fit a hidden state of shape \[2, 3\]"):
        torch.ops.aten._thnn_fused_lstm_cell(gates, gates, torch.zeros(2, 3, device=device))


STRICT_SCENARIO = """
import torch
for module in (torch.nn.LSTM(4, 6, num_layers=2), torch.nn.GRU(4, 6)):
    x = torch.randn(5, 3, 4)
    expected = module(x)[0]
    actual = module.to("foo")(x.to("foo"))[0]
    actual.sum().backward()
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)
print("matched")
"""


def test_cells_in_strict_memory_mode() -> None:
    """Every step of the fused cells is a kernel: none touches device memory from host code."""
    if "foo" not in DEVICES:
        pytest.skip("foo is not active in this process")
    environment = child_environment(TORCHPLUG_STRICT_MEMORY="1")
    result = run_python(STRICT_SCENARIO, environment, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "matched" in result.stdout


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
