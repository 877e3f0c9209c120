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
import logging
import unittest
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchplug_testing.compare import as_leaves, assert_matches_cpu, tensors_of, to_cpu_reference

log = logging.getLogger(__name__)

# Sampled mode (the default) takes the first samples of each operator: more in
# float32, the dtype most kernels are written and tuned for, one in each other
# dtype (every operator still runs in every dtype, so a crash shows), which keeps
# the whole suite to a few minutes per device on two cores.
PRIMARY_DTYPE = torch.float32
SAMPLES_PER_OPERATOR = 3
SAMPLES_PER_OPERATOR_OTHER_DTYPES = 1
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


def sample_limit(dtype: torch.dtype, full: bool) -> int | None:
    """Samples of each operator to take in ``dtype`` (None: all of them)."""
    if full:
        return None
    return SAMPLES_PER_OPERATOR if dtype == PRIMARY_DTYPE else SAMPLES_PER_OPERATOR_OTHER_DTYPES


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


@dataclass(frozen=True)
class SampleOutcome:
    """The verdict on one sample input.

    ``applicable`` is False when the CPU rejects the sample (or, backward, it
    has nothing to differentiate): it is not counted. ``failure`` is None when
    the device matched the CPU, else the first line of the error.
    """

    index: int
    applicable: bool = True
    failure: str | None = None


@dataclass
class SweepResult:
    """One operator's sweep in one mode and dtype, as far as it got."""

    total: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)
    # Samples the sweep got through, counted or not: the next one is where it stopped.
    reached: int = 0
    # Why the operator does not apply (its sample function's own skip), if it does not.
    skip_reason: str | None = None
    # How the process running the sweep died (signal, exit status or hang), if it did,
    # and its last words (faulthandler's traceback).
    crash: str | None = None
    crash_context: str = ""

    def add(self, outcome: SampleOutcome) -> None:
        self.reached = outcome.index + 1
        if not outcome.applicable:
            return
        self.total += 1
        if outcome.failure is None:
            self.passed += 1
        else:
            self.failures.append(f"sample {outcome.index}: {outcome.failure}")

    def record_crash(self, how: str, context: str = "") -> None:
        """The sample being evaluated killed the process: it counts as a failed sample."""
        self.crash, self.crash_context = how, context
        self.total += 1
        self.failures.append(f"sample {self.reached}: {how}")

    def raise_if_failed(self, label: str) -> None:
        """``label`` names the sweep: operator, mode, dtype and device."""
        if self.crash is not None:
            before = self.total - 1
            raise OperatorCrash(
                f"{label} crashed the process running it: {self.crash} on sample {self.reached}"
                + (
                    f" ({self.passed} of {before} samples before it matched the CPU)"
                    if before
                    else ""
                )
                + (f"\n{self.crash_context}" if self.crash_context else "")
            )
        if not self.failures:
            return
        shown = "\n  ".join(self.failures[:MAX_REPORTED_FAILURES])
        more = len(self.failures) - MAX_REPORTED_FAILURES
        raise AssertionError(
            f"{label}: {len(self.failures)} of {self.total} samples differ from the "
            f"CPU or fail on the device; {shown}" + (f"\n  ... and {more} more" if more > 0 else "")
        )


class OperatorCrash(AssertionError):
    """An operator killed (or hung) the process that ran it, instead of raising an error."""


def describe(error: BaseException) -> str:
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"{type(error).__name__}: {first_line[:200]}"


def samples(
    op: Any, device: str, dtype: torch.dtype, requires_grad: bool, limit: int | None
) -> Iterator[tuple[int, Any, BaseException | None]]:
    """``(index, sample, None)`` per sample; ``(index, None, error)`` if generating one failed."""
    torch.manual_seed(0)
    yield from numbered(op.sample_inputs(device, dtype, requires_grad=requires_grad), limit)


def numbered(
    generated: Iterable[Any], limit: int | None
) -> Iterator[tuple[int, Any, BaseException | None]]:
    """The first ``limit`` (None: all) items of a sample generator as ``(index, item, None)``;
    ``(index, None, error)`` ends it where generating an item failed."""
    items = iter(generated)
    for index in itertools.count() if limit is None else range(limit):
        try:
            item = next(items)
        except StopIteration:
            return
        except unittest.SkipTest:
            raise  # the sample function's own "not applicable": a skip with its reason
        except Exception as error:
            yield index, None, error
            return
        yield index, item, None


SEED = 0


def call(op: Any, arguments: tuple[Any, tuple, dict]) -> Any:
    torch.manual_seed(SEED)
    sample_input, args, kwargs = arguments
    return op(sample_input, *args, **kwargs)


def arguments_of(sample: Any) -> tuple[Any, tuple, dict]:
    return sample.input, tuple(sample.args), dict(sample.kwargs)


def involves_device(device: str, arguments: tuple) -> bool:
    """Whether a sample puts anything on the device: a tensor, or a ``device=`` argument.

    Factory samples without either (``arange(2)``) run on the CPU wherever
    they come from, so they say nothing about the device.
    """
    return any(t.device.type == device for t in tensors_of(arguments)) or _names(arguments, device)


def check_on_device(device: str, arguments: tuple, actual: Any) -> None:
    """Results stay on the device, unless the sample itself asks for the CPU (``x.to("cpu")``)."""
    if _names(arguments, "cpu"):
        return
    for produced in tensors_of(actual):
        if produced.device.type != device:
            raise AssertionError(f"result on {produced.device}, expected on {device}")


def _names(value: Any, device_type: str) -> bool:
    """Whether a device argument somewhere in ``value`` names ``device_type``."""
    if isinstance(value, torch.device | str):
        return str(value).split(":")[0] == device_type
    if isinstance(value, list | tuple):
        return any(_names(item, device_type) for item in value)
    if isinstance(value, dict):
        return any(_names(item, device_type) for item in value.values())
    return False


def compare(op: Any, actual: Any, expected: Any, is_random: Callable[[], bool]) -> None:
    """Values must match, except for random operators and uninitialised outputs (metadata only).

    ``is_random`` is asked only when the values differ: it runs the CPU
    computation again under a dispatch mode, which costs time and, for some
    kernels, changes their values (so the reference itself is computed without one).
    """
    if op.name in UNINITIALISED_OUTPUT:
        _assert_same_metadata(actual, expected)
        return
    try:
        assert_matches_cpu(actual, expected)
    except AssertionError:
        if not is_random():
            raise
        _assert_same_metadata(actual, expected)


def draws_random_numbers(evaluate: Callable[[Any, tuple], Any], op: Any, reference: tuple) -> bool:
    """Whether evaluating ``op`` on the CPU arguments runs a random ATen operator."""
    with RandomOpDetector() as detector:
        try:
            evaluate(op, reference)
        except Exception:
            log.debug("%s failed on the CPU under the random-op detector", op_id(op), exc_info=True)
    return detector.random


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


def _gradients(op: Any, arguments: tuple, postprocess: Callable[[Any], Any]) -> tuple | None:
    """Input gradients for fixed random output gradients. ``postprocess`` is the
    sample's ``output_process_fn_grad``: it keeps what is differentiated well
    defined (e.g. eigenvectors up to their phase)."""
    inputs = [t for t in tensors_of(arguments) if t.requires_grad]
    return random_output_gradients(tensors_of(postprocess(call(op, arguments))), inputs)


def random_output_gradients(
    outputs: list[torch.Tensor], inputs: list[torch.Tensor]
) -> tuple[torch.Tensor | None, ...] | None:
    """The gradients of ``inputs`` (None where unused) for fixed random gradients of the
    differentiable ``outputs``; None when either side has nothing differentiable.

    The output gradients come from a CPU generator with a fixed seed, so the
    device and the CPU differentiate the same function."""
    differentiable = [
        t for t in outputs if t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]
    if not inputs or not differentiable:
        return None
    generator = torch.Generator().manual_seed(17)
    grad_outputs = [
        torch.randn(o.shape, dtype=o.dtype, generator=generator).to(o.device)
        for o in differentiable
    ]
    return torch.autograd.grad(differentiable, inputs, grad_outputs, allow_unused=True)


def sweep(mode: str, op: Any, device: str, dtype: torch.dtype, limit: int | None) -> SweepResult:
    """The whole sweep of ``op`` in this process."""
    return collect(sample_outcomes(mode, op, device, dtype, limit))


def collect(outcomes: Iterable[SampleOutcome]) -> SweepResult:
    """A sweep's outcomes, in this process, as a result; a skip raised while
    generating them is the result's skip reason."""
    result = SweepResult()
    try:
        for outcome in outcomes:
            result.add(outcome)
    except unittest.SkipTest as skip:
        result.skip_reason = str(skip)
    return result


def sample_outcomes(
    mode: str, op: Any, device: str, dtype: torch.dtype, limit: int | None
) -> Iterator[SampleOutcome]:
    """Evaluates each sample on the device and on the CPU and compares, one
    outcome per sample index in order (so a crash can be pinned to a sample)."""
    requires_grad = mode == "backward"
    for index, sample, failed in samples(op, device, dtype, requires_grad, limit):
        if failed is not None:
            yield SampleOutcome(index, failure=describe(failed))
            return
        evaluate = (
            functools.partial(_gradients, postprocess=sample.output_process_fn_grad)
            if requires_grad
            else call
        )
        arguments = arguments_of(sample)
        if not involves_device(device, arguments):
            yield SampleOutcome(index, applicable=False)
            continue
        if requires_grad:
            # Leaves, as the CPU copies are: a sample's views of one leaf (a
            # window sliced from a larger one) would otherwise get no gradient
            # on the device and one on the CPU.
            arguments = as_leaves(arguments)
        reference = to_cpu_reference(arguments, device)
        try:
            expected = evaluate(op, reference)
        except Exception:
            yield SampleOutcome(index, applicable=False)
            continue
        if requires_grad and expected is None:
            yield SampleOutcome(index, applicable=False)
            continue
        try:
            actual = evaluate(op, arguments)
            check_on_device(device, arguments, actual)
            compare(
                op,
                actual,
                expected,
                functools.partial(draws_random_numbers, evaluate, op, reference),
            )
        except Exception as error:
            yield SampleOutcome(index, failure=describe(error))
            continue
        yield SampleOutcome(index)
