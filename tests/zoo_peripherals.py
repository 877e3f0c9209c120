"""What training scripts use around the model, each checked on a device against the CPU.

Every check is a function of the device type that raises AssertionError
(with the CPU's and the device's values) where the device does not do what
the CPU does. tests/test_training_peripherals.py runs them in place for the
backends active in the pytest process and, through ``main``, in a child
process for a PrivateUse1 backend that does not own the key there.

The conversion checks (ties, ``.grad``, the ``torch.__future__`` flags) take
the CPU's dtype conversion as the reference: ``module.to(torch.float64)`` goes
through the same ``Module._apply`` path as ``module.to("cuda")`` does, so a
device must give the same Parameter identities, ties and gradients.
"""

from __future__ import annotations

import copy
import json
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

SEED = 0


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[str], None]
    backward: bool  # needs autograd's backward on the device


CHECKS: dict[str, Check] = {}


def check(backward: bool) -> Callable[[Callable[[str], None]], Callable[[str], None]]:
    def register(function: Callable[[str], None]) -> Callable[[str], None]:
        CHECKS[function.__name__] = Check(function.__name__, function, backward)
        return function

    return register


def assert_same(cpu: Any, device: Any, what: str, atol: float = 1e-6) -> None:
    """The device's (nested) values equal the CPU's, exactly for integers and within atol."""
    torch.testing.assert_close(
        _to_cpu(device), cpu, atol=atol, rtol=0, msg=lambda default: f"{what}: {default}"
    )


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(item) for item in value)
    return value


class TiedModel(nn.Module):
    """An embedding tied to the output projection, as in GPT-2's LM head."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(10, 6)
        self.hidden = nn.Linear(6, 6)
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(torch.tanh(self.hidden(self.embedding(tokens)))))


def tied_model() -> TiedModel:
    torch.manual_seed(SEED)
    return TiedModel()


def tokens(device: str = "cpu") -> torch.Tensor:
    generator = torch.Generator().manual_seed(SEED + 1)
    return torch.randint(0, 10, (4, 5), generator=generator).to(device)


def lm_loss(model: nn.Module, device: str) -> torch.Tensor:
    batch = tokens(device)
    return F.cross_entropy(model(batch).flatten(0, 1), batch.flatten())


def train(
    model: nn.Module, device: str, optimizer: torch.optim.Optimizer, steps: int = 3
) -> list[float]:
    torch.manual_seed(SEED + 2)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = lm_loss(model, device)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def tie_groups(model: nn.Module) -> list[list[str]]:
    by_identity: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        by_identity.setdefault(id(parameter), []).append(name)
    return sorted(sorted(names) for names in by_identity.values() if len(names) > 1)


def conversion_summary(model: nn.Module, convert: Callable[[nn.Module], nn.Module]) -> dict:
    """What a conversion did to the Parameters: kept objects, ties, gradients, values."""
    before = dict(model.named_parameters(remove_duplicate=False))
    grads_before = {name: p.grad for name, p in before.items()}
    converted = convert(model)
    after = dict(converted.named_parameters(remove_duplicate=False))
    return {
        "returns_self": converted is model,
        "kept_parameter": {name: after[name] is before[name] for name in before},
        "kept_grad_object": {
            name: after[name].grad is grads_before[name]
            for name in before
            if grads_before[name] is not None
        },
        "is_parameter": {name: type(p) is nn.Parameter for name, p in after.items()},
        "requires_grad": {name: p.requires_grad for name, p in after.items()},
        "ties": tie_groups(converted),
        "values": {name: p.detach().cpu().double() for name, p in after.items()},
        "grads": {name: p.grad.cpu().double() for name, p in after.items() if p.grad is not None},
    }


def with_grads(model: nn.Module, device: str = "cpu") -> nn.Module:
    """One backward pass; seeded, so dropout draws the same mask on every device."""
    torch.manual_seed(SEED + 2)
    lm_loss(model, device).backward()
    return model


@contextmanager
def conversion_flags(overwrite: bool, swap: bool) -> Iterator[None]:
    saved = (
        torch.__future__.get_overwrite_module_params_on_conversion(),
        torch.__future__.get_swap_module_params_on_conversion(),
    )
    torch.__future__.set_overwrite_module_params_on_conversion(overwrite)
    torch.__future__.set_swap_module_params_on_conversion(swap)
    try:
        yield
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(saved[0])
        torch.__future__.set_swap_module_params_on_conversion(saved[1])


def assert_converts_like_cpu(device: str, convert: Callable[[nn.Module], nn.Module]) -> None:
    reference = conversion_summary(with_grads(tied_model()), lambda m: m.to(torch.float64))
    summary = conversion_summary(with_grads(tied_model()), convert)
    for key in ("returns_self", "kept_parameter", "kept_grad_object", "is_parameter", "ties"):
        assert summary[key] == reference[key], (
            f"{key} after the conversion to {device}: {summary[key]}; "
            f"the CPU's dtype conversion gives {reference[key]}"
        )
    assert_same(reference["values"], summary["values"], "parameter values")
    assert_same(reference["grads"], summary["grads"], "gradients")


# -- the tied-weights class of bugs ------------------------------------------


@check(backward=False)
def to_keeps_tied_parameters(device: str) -> None:
    """The issue's reproduction: ``.to(device)`` keeps one Parameter for tied weights."""
    model = nn.Module()
    model.a = nn.Embedding(4, 3)
    model.b = nn.Linear(3, 4, bias=False)
    model.b.weight = model.a.weight
    model.to(device)
    assert model.a.weight is model.b.weight, "the tied weights became two Parameters"
    assert model.a.weight.device.type == device


@check(backward=False)
def shallow_copy_type_is_compatible(device: str) -> None:
    """``Module._apply`` sets ``.data`` (keeping Parameters) exactly when this is True;
    it is True for CPU dtype conversions and for CUDA."""
    cpu = torch.ones(2)
    assert torch._has_compatible_shallow_copy_type(cpu, cpu.double())
    assert torch._has_compatible_shallow_copy_type(cpu, cpu.to(device)), (
        f"torch._has_compatible_shallow_copy_type(cpu, {device}) is False"
    )


@check(backward=False)
def parameter_data_accepts_device_tensor(device: str) -> None:
    parameter = nn.Parameter(torch.ones(3))
    replacement = torch.arange(3.0, device=device)
    parameter.data = replacement
    assert parameter.device == replacement.device
    assert isinstance(parameter, nn.Parameter)
    assert parameter.requires_grad
    assert_same(torch.arange(3.0), parameter, "parameter.data")


@check(backward=False)
def module_to_converts_like_cpu(device: str) -> None:
    """Identities, ties and ``.grad`` (kept, moved) after ``model.to(device)``."""
    assert_converts_like_cpu(device, lambda model: model.to(device))


@check(backward=False)
def module_device_method_converts_like_cpu(device: str) -> None:
    """``Module.foo()`` (the method the backend adds, like ``Module.cuda()``)."""
    assert_converts_like_cpu(device, lambda model: getattr(model, device)())


@check(backward=False)
def overwrite_flag_converts_like_cpu(device: str) -> None:
    with conversion_flags(overwrite=True, swap=False):
        assert_converts_like_cpu(device, lambda model: model.to(device))


@check(backward=False)
def swap_flag_converts_like_cpu(device: str) -> None:
    with conversion_flags(overwrite=False, swap=True):
        assert_converts_like_cpu(device, lambda model: model.to(device))


@check(backward=False)
def swap_tensors_between_cpu_and_device(device: str) -> None:
    on_cpu = nn.Parameter(torch.arange(4.0))
    on_device = nn.Parameter(torch.arange(4.0, 8.0).to(device))
    cpu_object, device_object = id(on_cpu), id(on_device)
    torch.utils.swap_tensors(on_cpu, on_device)
    assert (id(on_cpu), id(on_device)) == (cpu_object, device_object)
    assert on_cpu.device.type == device
    assert on_device.device.type == "cpu"
    assert_same(torch.arange(4.0, 8.0), on_cpu, "the swapped-in device values")
    assert_same(torch.arange(4.0), on_device, "the swapped-in CPU values")


@check(backward=False)
def load_state_dict_assign_like_cpu(device: str) -> None:
    """``load_state_dict(assign=True)`` into a meta-device model, then re-tying, as
    checkpoint loaders do."""

    def load(state: dict[str, torch.Tensor]) -> nn.Module:
        with torch.device("meta"):
            model = TiedModel()
        model.load_state_dict(state, assign=True)
        model.head.weight = model.embedding.weight
        return model

    state = tied_model().state_dict()
    reference = load(state)
    model = load({name: tensor.to(device) for name, tensor in state.items()})
    assert tie_groups(model) == tie_groups(reference)
    devices = {parameter.device.type for parameter in model.parameters()}
    assert devices == {device}, f"parameters on {devices}"
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in model.parameters())
    assert_same(reference.state_dict(), model.state_dict(), "loaded weights")


@check(backward=False)
def deepcopy_keeps_ties(device: str) -> None:
    model = tied_model().to(device)
    duplicate = copy.deepcopy(model)
    assert tie_groups(duplicate) == tie_groups(tied_model())
    assert duplicate.head.weight is not model.head.weight
    assert duplicate.head.weight.device == model.head.weight.device
    assert_same(tied_model().state_dict(), duplicate.state_dict(), "deep-copied weights")


@check(backward=True)
def optimizer_load_state_dict_moves_state(device: str) -> None:
    """A CPU optimizer checkpoint loaded into a device optimizer: the moments move to
    the parameters' device, training continues as on the CPU."""
    cpu_model = tied_model()
    cpu_optimizer = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    train(cpu_model, "cpu", cpu_optimizer, steps=2)
    checkpoint_state = copy.deepcopy(cpu_optimizer.state_dict())
    model = copy.deepcopy(cpu_model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    optimizer.load_state_dict(checkpoint_state)
    for parameter in model.parameters():
        state = optimizer.state[parameter]
        for key in ("exp_avg", "exp_avg_sq"):
            assert state[key].device == parameter.device, f"{key} on {state[key].device}"
        assert state["step"].device.type == "cpu", "AdamW keeps a non-fused step on the host"
    assert_same(train(cpu_model, "cpu", cpu_optimizer), train(model, device, optimizer), "losses")
    assert_same(cpu_model.state_dict(), model.state_dict(), "weights")


@check(backward=True)
def parametrize_trains_like_cpu(device: str) -> None:
    """A parametrization of a tied weight (its ``original`` stays the embedding's
    Parameter) and ``parametrizations.weight_norm``, registered on the CPU, moved,
    trained, then removed."""

    class Scaled(nn.Module):
        def forward(self, weight: torch.Tensor) -> torch.Tensor:
            return weight * 0.5

        def right_inverse(self, weight: torch.Tensor) -> torch.Tensor:
            return weight * 2.0

    def build() -> nn.Module:
        model = tied_model()
        nn.utils.parametrize.register_parametrization(model.head, "weight", Scaled())
        nn.utils.parametrizations.weight_norm(model.hidden)
        return model

    cpu_model, model = build(), build().to(device)
    assert tie_groups(model) == tie_groups(cpu_model)
    assert model.head.parametrizations.weight.original is model.embedding.weight
    cpu_losses = train(cpu_model, "cpu", torch.optim.AdamW(cpu_model.parameters(), lr=1e-2))
    losses = train(model, device, torch.optim.AdamW(model.parameters(), lr=1e-2))
    assert_same(cpu_losses, losses, "losses")
    for each in (cpu_model, model):
        nn.utils.parametrize.remove_parametrizations(each.hidden, "weight")
        nn.utils.parametrize.remove_parametrizations(each.head, "weight")
    assert_same(cpu_model.state_dict(), model.state_dict(), "weights after removal")


# -- training peripherals ------------------------------------------------------


@check(backward=True)
def tied_model_trains_like_cpu(device: str) -> None:
    cpu_model, model = tied_model(), tied_model().to(device)
    cpu_losses = train(cpu_model, "cpu", torch.optim.AdamW(cpu_model.parameters(), lr=1e-2))
    losses = train(model, device, torch.optim.AdamW(model.parameters(), lr=1e-2))
    assert_same(cpu_losses, losses, "losses")
    assert_same(cpu_model.state_dict(), model.state_dict(), "weights")


@check(backward=True)
def clip_grad_norm_foreach(device: str) -> None:
    """The device takes the foreach path (the CPU has none: its reference is the loop)."""
    cpu_model, model = with_grads(tied_model()), with_grads(tied_model().to(device), device)
    cpu_norm = nn.utils.clip_grad_norm_(cpu_model.parameters(), max_norm=0.5, foreach=False)
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5, foreach=True)
    assert norm.device.type == device
    assert_same(cpu_norm, norm, "total norm")
    cpu_grads = {name: p.grad for name, p in cpu_model.named_parameters()}
    assert_same(cpu_grads, {name: p.grad for name, p in model.named_parameters()}, "grads")


def _adamw_like_cpu(device: str, **options: bool) -> None:
    cpu_model, model = tied_model(), tied_model().to(device)
    cpu_optimizer = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2, foreach=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, **options)
    assert_same(train(cpu_model, "cpu", cpu_optimizer), train(model, device, optimizer), "losses")
    assert_same(cpu_model.state_dict(), model.state_dict(), "weights")
    for parameter, cpu_parameter in zip(model.parameters(), cpu_model.parameters(), strict=True):
        assert_same(
            cpu_optimizer.state[cpu_parameter]["exp_avg_sq"],
            optimizer.state[parameter]["exp_avg_sq"],
            "second moments",
        )


@check(backward=True)
def adamw_foreach(device: str) -> None:
    _adamw_like_cpu(device, foreach=True)


@check(backward=True)
def adamw_fused(device: str) -> None:
    """Fused AdamW runs (``torch._fused_adamw_`` on the device), as on CUDA."""
    _adamw_like_cpu(device, fused=True)


class CheckpointedBlocks(nn.Module):
    def __init__(self, use_checkpoint: bool, reentrant: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Dropout(0.3)) for _ in range(3)
        )
        self.use_checkpoint = use_checkpoint
        self.reentrant = reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            if self.use_checkpoint:
                x = checkpoint(block, x, use_reentrant=self.reentrant, preserve_rng_state=True)
            else:
                x = block(x)
        return x


def _checkpoint_gradients(device: str, use_checkpoint: bool, reentrant: bool) -> dict:
    torch.manual_seed(SEED)
    model = CheckpointedBlocks(use_checkpoint, reentrant).to(device)
    x = torch.randn(8, 16).to(device).requires_grad_()
    torch.manual_seed(SEED + 3)
    model(x).square().sum().backward()
    return {"x": x.grad, **{name: p.grad for name, p in model.named_parameters()}}


@check(backward=True)
def checkpoint_replays_dropout(device: str) -> None:
    """Dropout inside ``torch.utils.checkpoint`` draws the same mask on recompute (the
    device's RNG state is saved and restored), so gradients equal the plain run's."""
    reference = _checkpoint_gradients("cpu", use_checkpoint=False, reentrant=False)
    for reentrant in (False, True):
        plain = _checkpoint_gradients(device, use_checkpoint=False, reentrant=reentrant)
        checkpointed = _checkpoint_gradients(device, use_checkpoint=True, reentrant=reentrant)
        assert_same(reference, plain, "gradients without checkpointing")
        assert_same(
            reference, checkpointed, f"gradients with checkpoint(use_reentrant={reentrant})"
        )


@check(backward=True)
def gradient_accumulation(device: str) -> None:
    """Four micro-batches accumulated into one AdamW step, twice."""

    def accumulate(model: nn.Module, where: str) -> list[float]:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        generator = torch.Generator().manual_seed(SEED + 4)
        batches = torch.randint(0, 10, (2, 4, 3, 5), generator=generator)
        torch.manual_seed(SEED + 2)
        losses = []
        for step in batches:
            optimizer.zero_grad()
            for micro in step.to(where):
                loss = F.cross_entropy(model(micro).flatten(0, 1), micro.flatten()) / len(step)
                loss.backward()
                losses.append(loss.item())
            optimizer.step()
        return losses

    cpu_model, model = tied_model(), tied_model().to(device)
    assert_same(accumulate(cpu_model, "cpu"), accumulate(model, device), "micro-batch losses")
    assert_same(cpu_model.state_dict(), model.state_dict(), "weights")


@check(backward=True)
def scaled_dot_product_attention(device: str) -> None:
    """Forward and backward with boolean and additive masks, ``is_causal`` and grouped
    query heads."""
    generator = torch.Generator().manual_seed(SEED + 5)
    query = torch.randn(2, 4, 6, 8, generator=generator)
    key = torch.randn(2, 4, 7, 8, generator=generator)
    value = torch.randn(2, 4, 7, 8, generator=generator)
    boolean_mask = torch.rand(2, 1, 6, 7, generator=generator) > 0.3
    boolean_mask[..., 0] = True  # no fully masked row
    additive_mask = torch.randn(6, 7, generator=generator)
    cases: dict[str, tuple[tuple[torch.Tensor, ...], dict[str, Any]]] = {
        "no mask": ((query, key, value), {}),
        "boolean mask": ((query, key, value), {"attn_mask": boolean_mask}),
        "additive mask": ((query, key, value), {"attn_mask": additive_mask, "scale": 0.3}),
        "is_causal": ((query, key[:, :, :6], value[:, :, :6]), {"is_causal": True}),
        "grouped query": ((query, key[:, :2], value[:, :2]), {"enable_gqa": True}),
    }
    for case, (inputs, options) in cases.items():
        results = {}
        for where in ("cpu", device):
            leaves = [t.to(where).detach().requires_grad_() for t in inputs]
            moved = {
                k: v.to(where) if isinstance(v, torch.Tensor) else v for k, v in options.items()
            }
            output = F.scaled_dot_product_attention(*leaves, **moved)
            output.backward(torch.cos(output.detach()))
            results[where] = {"output": output, "grads": [leaf.grad for leaf in leaves]}
        assert_same(_to_cpu(results["cpu"]), results[device], f"attention, {case}", atol=1e-5)


def run_all(device: str, names: list[str]) -> dict[str, dict[str, str | None]]:
    """Each check's error (None where it passed), for a child process to report."""
    outcomes = {}
    for name in names:
        try:
            CHECKS[name].run(device)
            outcomes[name] = {"error": None, "kind": None}
        except Exception as error:
            outcomes[name] = {
                "error": f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-4)}",
                "kind": type(error).__name__,
            }
    return outcomes


def main(device: str, names: list[str], output: Path) -> None:
    output.write_text(json.dumps(run_all(device, names), indent=1))
