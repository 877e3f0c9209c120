"""The operator sweep: every OpInfo operator and sample input, on the device and on the CPU.

Samples are generated on the device (seeded), as PyTorch's own
``test_compare_cpu`` does, and copied to the CPU with their strides and
storage offsets; the operator's results (and, for backward, its input
gradients for fixed random output gradients) are compared with the CPU's.
Random operators (the CPU call runs a ``nondeterministic_seeded`` ATen op) and operators
whose outputs are uninitialised (``empty``) are compared by shape and dtype
only: a device's random streams need not be the CPU's (the ``rng`` group checks
their reproducibility).
"""

from __future__ import annotations

import functools
import itertools
import unittest
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchplug_testing.compare import assert_matches_cpu, tensors_of, to_cpu_reference

# Sampled mode (the default) takes this many samples of each operator: the
# whole suite then fits a few minutes per device on two cores.
DEFAULT_SAMPLES_PER_OPERATOR = 3
MODES = ("forward", "backward")
MAX_REPORTED_FAILURES = 3
# Their outputs are uninitialised memory: only shape, dtype and device can be compared.
UNINITIALISED_OUTPUT = frozenset(
    {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
)


@functools.cache
def op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db as database

    return list(database)


def op_id(op: Any) -> str:
    """``name`` or ``name.variant``: the operator's name in reports and expectation files."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def operators(mode: str, dtype: torch.dtype) -> list[Any]:
    """The operators of the sweep for ``mode`` and ``dtype`` (what the CPU supports)."""
    chosen = []
    for op in op_db():
        if dtype not in op.supported_dtypes("cpu"):
            continue
        if mode == "backward" and not (
            op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
        ):
            continue
        chosen.append(op)
    return chosen


@dataclass
class SweepResult:
    total: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)

    def record(self, index: int, error: BaseException | None) -> None:
        self.total += 1
        if error is None:
            self.passed += 1
        else:
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self.failures.append(f"sample {index}: {type(error).__name__}: {first_line[:200]}")

    def raise_if_failed(self, op_name: str, mode: str) -> None:
        if not self.failures:
            return
        shown = "\n  ".join(self.failures[:MAX_REPORTED_FAILURES])
        more = len(self.failures) - MAX_REPORTED_FAILURES
        raise AssertionError(
            f"{op_name} {mode}: {len(self.failures)} of {self.total} samples differ from the "
            f"CPU or fail on the device; {shown}" + (f"\n  ... and {more} more" if more > 0 else "")
        )


def samples(
    op: Any, device: str, dtype: torch.dtype, requires_grad: bool, limit: int | None
) -> Iterator[tuple[int, Any, BaseException | None]]:
    """``(index, sample, None)`` per sample; ``(index, None, error)`` if generating one failed."""
    torch.manual_seed(0)
    generated = iter(op.sample_inputs(device, dtype, requires_grad=requires_grad))
    for index in itertools.count() if limit is None else range(limit):
        try:
            sample = next(generated)
        except StopIteration:
            return
        except unittest.SkipTest:
            raise  # the sample function's own "not applicable": a skip with its reason
        except Exception as error:
            yield index, None, error
            return
        yield index, sample, None


SEED = 0


def call(op: Any, arguments: tuple[Any, tuple, dict]) -> Any:
    torch.manual_seed(SEED)
    sample_input, args, kwargs = arguments
    return op(sample_input, *args, **kwargs)


def arguments_of(sample: Any) -> tuple[Any, tuple, dict]:
    return sample.input, tuple(sample.args), dict(sample.kwargs)


def check_on_device(device: str, arguments: tuple, actual: Any) -> None:
    """Results stay on the device, unless the sample itself asks for the CPU (``x.to("cpu")``)."""
    if _names_cpu(arguments):
        return
    for produced in tensors_of(actual):
        if produced.device.type != device:
            raise AssertionError(f"result on {produced.device}, expected on {device}")


def _names_cpu(value: Any) -> bool:
    if isinstance(value, torch.device | str):
        return str(value).split(":")[0] == "cpu"
    if isinstance(value, list | tuple):
        return any(_names_cpu(item) for item in value)
    if isinstance(value, dict):
        return any(_names_cpu(item) for item in value.values())
    return False


def compare(op: Any, actual: Any, expected: Any, random: bool) -> None:
    """Values must match, except for random operators and uninitialised outputs (metadata only)."""
    if random or op.name in UNINITIALISED_OUTPUT:
        _assert_same_metadata(actual, expected)
    else:
        assert_matches_cpu(actual, expected)


class RandomOpDetector(TorchDispatchMode):
    """Notes whether any ATen operator tagged ``nondeterministic_seeded`` runs under it.

    Such an operator draws from a generator, so its values depend on the
    device's random streams, which need not be the CPU's (OpInfo's own seeding
    wrappers hide this from any check of the generator state).
    """

    def __init__(self) -> None:
        super().__init__()
        self.random = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.random = True
        return func(*args, **(kwargs or {}))


def _assert_same_metadata(actual: Any, expected: Any) -> None:
    produced, reference = tensors_of(actual), tensors_of(expected)
    assert len(produced) == len(reference), f"{len(produced)} tensors, expected {len(reference)}"
    for a, e in zip(produced, reference, strict=True):
        assert (a.shape, a.dtype) == (e.shape, e.dtype), (
            f"{a.shape}/{a.dtype} != {e.shape}/{e.dtype}"
        )


def sweep_forward(op: Any, device: str, dtype: torch.dtype, limit: int | None) -> SweepResult:
    return _sweep(op, device, dtype, limit, call, requires_grad=False)


def _gradients(op: Any, arguments: tuple) -> tuple | None:
    inputs = [t for t in tensors_of(arguments) if t.requires_grad]
    outputs = [
        t for t in tensors_of(call(op, arguments)) if t.requires_grad and t.is_floating_point()
    ]
    if not inputs or not outputs:
        return None
    generator = torch.Generator().manual_seed(17)
    grad_outputs = [
        torch.randn(o.shape, dtype=o.dtype, generator=generator).to(o.device) for o in outputs
    ]
    return torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True)


def sweep_backward(op: Any, device: str, dtype: torch.dtype, limit: int | None) -> SweepResult:
    return _sweep(op, device, dtype, limit, _gradients, requires_grad=True)


def _sweep(
    op: Any,
    device: str,
    dtype: torch.dtype,
    limit: int | None,
    evaluate: Callable[[Any, tuple], Any],
    requires_grad: bool,
) -> SweepResult:
    """Evaluates each sample on the device and on the CPU and compares. A sample
    the CPU rejects, or (backward) one with nothing to differentiate, is skipped."""
    result = SweepResult()
    for index, sample, failed in samples(op, device, dtype, requires_grad, limit):
        if failed is not None:
            result.record(index, failed)
            break
        arguments = arguments_of(sample)
        reference = to_cpu_reference(arguments, device)
        try:
            with RandomOpDetector() as detector:
                expected = evaluate(op, reference)
        except Exception:
            continue
        if requires_grad and expected is None:
            continue
        error: BaseException | None = None
        try:
            actual = evaluate(op, arguments)
            check_on_device(device, arguments, actual)
            compare(op, actual, expected, detector.random)
        except Exception as caught:
            error = caught
        result.record(index, error)
    return result
