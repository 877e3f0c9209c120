"""Checks the torch internals of :mod:`torchplug.inductor.replacements` against
the installed torch once, installs the replacements when they all match, and
otherwise falls back with one warning that says what differs and what happens.
"""

from __future__ import annotations

import logging
import warnings

import torch

from torchplug.inductor.errors import InductorIntegrationWarning
from torchplug.inductor.replacements import ENTRY, RELIED_ON, REPLACED, state
from torchplug.inductor.symbols import Devices

logger = logging.getLogger(__name__)


def activate(devices: Devices) -> bool:
    """Verify every internal against the installed torch and install the
    replacements, once. True when Inductor may generate code for torchplug
    devices; False when their graphs go to the eager kernels instead."""
    if not state.activated:
        state.activated = True
        _verify_and_install(devices)
    return state.generates_code


def fall_back(problem: str) -> None:
    """Give up code generation for torchplug devices, saying why (once)."""
    state.generates_code = False
    _report([problem])


def problems() -> tuple[str, ...]:
    """What did not match the installed torch at activation (empty when all did)."""
    return tuple(state.problems)


def _verify_and_install(devices: Devices) -> None:
    entry_problem = ENTRY.problem()
    codegen_problems = [
        problem
        for internal in (*REPLACED[1:], *RELIED_ON)
        if (problem := internal.problem()) is not None
    ]
    try:
        compile_fx = ENTRY.resolve()
    except (ImportError, AttributeError):
        compile_fx = None
    if callable(compile_fx):
        # Installed even when its signature changed: routing only needs the
        # graph and its inputs first, which every compile_fx has taken.
        ENTRY.install(devices)
        state.routes_to_eager_kernels = True
        state.explains_failures = entry_problem is None
    if codegen_problems:
        state.generates_code = False
    else:
        for internal in REPLACED[1:]:
            internal.install(devices)
            logger.debug("replaced %s", internal.symbol)
    _report([problem for problem in (entry_problem, *codegen_problems) if problem])


def _report(found: list[str]) -> None:
    if not found:
        return
    first = not state.problems
    state.problems.extend(found)
    if state.generates_code:
        consequence = "Compile failures on torchplug devices are not explained."
    elif state.routes_to_eager_kernels:
        consequence = (
            "Graphs on torchplug devices run with the devices' eager kernels, as with "
            "torch.compile(..., backend='aot_eager'): no Inductor code generation, the CPU's "
            "numbers."
        )
    else:
        consequence = (
            "Inductor cannot compile for torchplug devices: compile with "
            "torch.compile(..., backend='aot_eager')."
        )
    message = (
        f"torchplug's Inductor integration does not match torch {torch.__version__}: "
        f"{'; '.join(found)}. {consequence} Install a torchplug release verified for this torch."
    )
    if first:
        warnings.warn(message, InductorIntegrationWarning, stacklevel=2)
    else:
        logger.warning("%s", message)
