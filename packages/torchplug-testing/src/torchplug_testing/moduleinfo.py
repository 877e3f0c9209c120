"""The module sweep: every module of PyTorch's ModuleInfo database, on the device and on the CPU.

As PyTorch's own ``test_cpu_gpu_parity``: each module input (constructor and
forward arguments, generated on the CPU, seeded) builds the module on the CPU;
an identical copy (same parameters and buffers) goes to the device. Forward
compares the outputs and the buffers after the call (running statistics) in
training mode, and in eval mode too where the module says the two differ;
backward compares the gradients of the inputs and of the parameters for fixed
random output gradients. Modules that draw random numbers by design are
skipped with the reason; a sample whose CPU run draws random numbers (a
dropout left on) is compared by shape and dtype only, as in the OpInfo sweep.
"""

from __future__ import annotations

import copy
import functools
import logging
import unittest
from collections.abc import Iterator
from typing import Any

import torch

from torchplug_testing import opinfo
from torchplug_testing.compare import assert_matches_cpu, tensors_of, to_cpu_reference, to_device

log = logging.getLogger(__name__)

MODES = ("forward", "backward")
# The crash guard's worker tells a module sweep from an operator's by this prefix.
REQUEST_PREFIX = "module_"
PRIMARY_DTYPE = torch.float32
INPUTS_PER_MODULE = 3
INPUTS_PER_MODULE_OTHER_DTYPES = 1
SEED = 0
# Modules whose outputs are random by design: the device's random streams need not
# be the CPU's (the rng group checks their reproducibility).
RANDOM_MODULES = {
    "nn.FractionalMaxPool2d": "draws its pooling regions from the generator: random by design",
    "nn.FractionalMaxPool3d": "draws its pooling regions from the generator: random by design",
}


@functools.cache
def module_db() -> list[Any]:
    from torch.testing._internal.common_modules import module_db as database

    return list(database)


@functools.cache
def by_id() -> dict[str, Any]:
    return {module_id(info): info for info in module_db()}


def module_id(info: Any) -> str:
    """``nn.Linear``: the module's name in reports and expectation files."""
    return info.name


def modules(mode: str, dtype: torch.dtype) -> list[Any]:
    """The modules of the sweep in ``dtype``: those that declare it (backward: differentiable ones)."""
    differentiable = dtype.is_floating_point or dtype.is_complex
    return [
        info
        for info in module_db()
        if dtype in info.dtypes and (mode == "forward" or differentiable)
    ]


def dtypes() -> list[torch.dtype]:
    """Every dtype some module declares, float32 first."""
    declared = {dtype for info in module_db() for dtype in info.dtypes}
    return sorted(declared, key=lambda dtype: (dtype != PRIMARY_DTYPE, str(dtype)))


def input_limit(dtype: torch.dtype, full: bool) -> int | None:
    if full:
        return None
    return INPUTS_PER_MODULE if dtype == PRIMARY_DTYPE else INPUTS_PER_MODULE_OTHER_DTYPES


def sweep(
    mode: str, info: Any, device: str, dtype: torch.dtype, limit: int | None
) -> opinfo.SweepResult:
    """The whole sweep of one module in this process (no crash guard)."""
    return opinfo.collect(sample_outcomes(mode, info, device, dtype, limit))


def sample_outcomes(
    mode: str, info: Any, device: str, dtype: torch.dtype, limit: int | None
) -> Iterator[opinfo.SampleOutcome]:
    """One outcome per module input, in order (so a crash can be pinned to an input)."""
    if module_id(info) in RANDOM_MODULES:
        raise unittest.SkipTest(RANDOM_MODULES[module_id(info)])
    backward = mode == "backward"
    torch.manual_seed(SEED)
    generated = info.module_inputs_func(
        info, device="cpu", dtype=dtype, requires_grad=backward, training=True
    )
    for index, module_input, failed in opinfo.numbered(generated, limit):
        if failed is not None:
            yield opinfo.SampleOutcome(index, failure=opinfo.describe(failed))
            return
        trainings = (True, False) if info.train_and_eval_differ and not backward else (True,)
        outcome = opinfo.SampleOutcome(index)
        for training in trainings:
            outcome = evaluate(info, module_input, device, dtype, training, backward, index)
            if not outcome.applicable or outcome.failure is not None:
                break
        yield outcome


def evaluate(
    info: Any,
    module_input: Any,
    device: str,
    dtype: torch.dtype,
    training: bool,
    backward: bool,
    index: int,
) -> opinfo.SampleOutcome:
    mode = "train" if training else "eval"
    try:
        cpu_module = build(info, module_input, dtype, training)
        generated = (module_input.forward_input.args, module_input.forward_input.kwargs)
        device_args = to_device(generated, device)
        # Leaves copied from the device's, as the device's are: an input given twice
        # (one tensor as input and target) is two leaves on both sides.
        cpu_args = to_cpu_reference(device_args, device)
        device_module = copy.deepcopy(cpu_module).to(device)
        expected = run(cpu_module, cpu_args, backward)
    except Exception:
        return opinfo.SampleOutcome(index, applicable=False)  # the CPU rejects it
    if expected is None:
        return opinfo.SampleOutcome(index, applicable=False)  # nothing to differentiate
    try:
        actual = run(device_module, device_args, backward)
        for produced in tensors_of(actual):
            if produced.device.type != device:
                raise AssertionError(f"result on {produced.device}, expected on {device}")
        compare(actual, expected, lambda: draws_random_numbers(info, module_input, dtype, training))
    except Exception as error:
        return opinfo.SampleOutcome(index, failure=f"{mode} mode: {opinfo.describe(error)}")
    return opinfo.SampleOutcome(index)


def build(info: Any, module_input: Any, dtype: torch.dtype, training: bool) -> torch.nn.Module:
    """The module on the CPU in ``dtype``, seeded; a lazy module sees its input once."""
    args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
    torch.manual_seed(SEED)
    module = info.module_cls(*args, **kwargs).to(dtype)
    module.train(training)
    if info.is_lazy:
        with torch.no_grad():
            module(*module_input.forward_input.args, **module_input.forward_input.kwargs)
    return module


def run(module: torch.nn.Module, arguments: tuple, backward: bool) -> list[torch.Tensor] | None:
    """Forward: the outputs, then the buffers. Backward: the gradients of the inputs and
    parameters (None when nothing is differentiable)."""
    args, kwargs = arguments
    torch.manual_seed(SEED)
    output = module(*args, **kwargs)
    if not backward:
        return tensors_of(output) + list(module.buffers())
    differentiable = [t for t in tensors_of((args, kwargs)) if t.requires_grad] + [
        p for p in module.parameters() if p.requires_grad
    ]
    gradients = opinfo.random_output_gradients(tensors_of(output), differentiable)
    if gradients is None:
        return None
    return [g for g in gradients if g is not None]


def compare(actual: list, expected: list, is_random) -> None:
    """Values must match, unless the CPU's run draws random numbers (then shapes and dtypes)."""
    try:
        assert len(actual) == len(expected), f"{len(actual)} tensors, expected {len(expected)}"
        assert_matches_cpu(actual, expected)
    except AssertionError:
        if not is_random():
            raise
        for a, e in zip(actual, expected, strict=True):
            assert (a.shape, a.dtype) == (e.shape, e.dtype), f"{a.shape}/{a.dtype} != {e.shape}"


def draws_random_numbers(info: Any, module_input: Any, dtype: torch.dtype, training: bool) -> bool:
    """Whether the module's CPU forward runs an ATen operator that draws random numbers."""
    module = build(info, module_input, dtype, training)
    with opinfo.RandomOpDetector() as detector:
        try:
            module(*module_input.forward_input.args, **module_input.forward_input.kwargs)
        except Exception:
            log.debug(
                "%s failed on the CPU under the random-op detector", module_id(info), exc_info=True
            )
    return detector.random
