"""The Inductor integration's two parts: the registration, and the torch internals
it replaces, each checked against the installed torch when Inductor loads.

A torch that differs from what was verified must give one warning and a
compile that still works (the eager-kernel fallback) and matches the CPU; the
cache key must cover every file of the integration package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch

from torchplug.inductor import registration, replacements, verification
from torchplug.inductor.symbols import TorchInternal

INTERNALS = (*replacements.REPLACED, *replacements.RELIED_ON)
INSTALLED_TORCH = torch.__version__.split("+")[0]
COMPILE_MD = Path(__file__).parents[2] / "docs" / "compile.md"


def _run_child(code: str, timeout: float = 900, **env: str) -> dict:
    """Runs ``code`` in a fresh interpreter; its last output line is JSON.

    From a file, so that the functions it defines have a source to fingerprint."""
    with tempfile.TemporaryDirectory() as directory:
        script = Path(directory) / "child.py"
        script.write_text(textwrap.dedent(code))
        result = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **env},
        )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fingerprints_before_activation() -> dict[str, list]:
    # Autoload off: no backend activates, so nothing is replaced yet.
    return _run_child(
        """
        import json
        import torch._inductor.compile_fx
        from torchplug.inductor import replacements

        print(json.dumps({
            internal.symbol: [internal.fingerprint(), internal.problem()]
            for internal in (*replacements.REPLACED, *replacements.RELIED_ON)
        }))
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )


@pytest.mark.parametrize("internal", INTERNALS, ids=lambda internal: internal.symbol)
def test_each_internal_is_the_verified_one(
    internal: TorchInternal, fingerprints_before_activation: dict[str, list]
) -> None:
    fingerprint, problem = fingerprints_before_activation[internal.symbol]
    assert problem is None, f"{problem}; torch {INSTALLED_TORCH}'s fingerprint is {fingerprint!r}"
    if INSTALLED_TORCH in internal.verified:
        assert internal.verified[INSTALLED_TORCH] == fingerprint


def test_each_internal_says_why() -> None:
    assert [internal.symbol for internal in INTERNALS if not internal.why] == []
    assert len({internal.symbol for internal in INTERNALS}) == len(INTERNALS)
    assert replacements.REPLACED[0] is replacements.ENTRY
    assert all(internal.replace is not None for internal in replacements.REPLACED)
    assert all(internal.replace is None for internal in replacements.RELIED_ON)


def test_replacements_are_installed_after_a_compile(device: str) -> None:
    x = torch.randn(4, 4)
    compiled = torch.compile(lambda x: (x * 2).sin())
    torch.testing.assert_close(compiled(x.to(device)).cpu(), (x * 2).sin())
    assert verification.problems() == ()
    for internal in replacements.REPLACED:
        installed = internal.resolve()
        assert installed.__code__.co_filename == replacements.__file__, internal.symbol
        for module in internal.also_bound_in:
            assert getattr(sys.modules[module], internal.name) is installed


def test_dynamo_knows_the_device(device: str) -> None:
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device(device)
    module = getattr(torch, device)
    assert interface.device_count() == module.device_count()
    assert interface.current_stream() == module.current_stream()
    assert interface.Stream is module.Stream


# Each simulation changes torch the way a new release could, before the
# integration checks it (the hooks run when the named module is imported).
SIMULATIONS = {
    "replaced function changed": (
        """
        def simulate(ir):
            original = ir.is_cpu

            def is_cpu(x):
                return original(x)

            ir.is_cpu = is_cpu

        after_import("torch._inductor.ir", simulate)
        """,
        "torch._inductor.ir.is_cpu differs",
    ),
    "replaced function missing": (
        """
        after_import("torch._inductor.lowering", lambda m: delattr(m, "get_constant_value"))
        """,
        "torch._inductor.lowering.get_constant_value is missing",
    ),
    "overridden method changed": (
        """
        def simulate(wrapper):
            original = wrapper.PythonWrapperCodegen.make_allocation

            def make_allocation(
                self, name, device, dtype, shape, stride, allocation_shape=None,
                is_pinned=False, memory_format=None,
            ):
                return original(self, name, device, dtype, shape, stride, allocation_shape)

            wrapper.PythonWrapperCodegen.make_allocation = make_allocation

        after_import("torch._inductor.codegen.wrapper", simulate)
        """,
        "PythonWrapperCodegen.make_allocation differs",
    ),
    "entry point changed": (
        # compile_fx is checked as its own callbacks run: a torch with another
        # compile_fx is the same as a table recorded for another one.
        """
        from torchplug.inductor import replacements

        replacements.ENTRY.verified.clear()
        replacements.ENTRY.verified["2.15.0"] = "(model_, example_inputs_)"
        """,
        "torch._inductor.compile_fx.compile_fx differs",
    ),
}

CHILD = """
import json
import sys
import warnings

import torch

imported_by_torch = sorted(
    name for name in ("torch._dynamo", "torch._inductor") if name in sys.modules
)
from torchplug.inductor.errors import InductorIntegrationWarning
from torchplug.inductor.hooks import after_import

{simulation}

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4)
)
x = torch.randn(5, 8)
model(x).sum().backward()
expected_grad = model[0].weight.grad.clone()
expected = model(x).detach()
model.zero_grad()
model.to("foo")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    compiled = torch.compile(model)
    compiled(x.to("foo")).sum().backward()
    got = compiled(x.to("foo"))
from torch._inductor.codegen.common import get_scheduling_for_device
from torchplug.inductor import replacements

print(json.dumps({{
    "imported_by_torch": imported_by_torch,
    "warnings": [
        str(w.message) for w in caught if issubclass(w.category, InductorIntegrationWarning)
    ],
    "matches_cpu": torch.allclose(got.cpu(), expected, atol=1e-5),
    "grad_matches_cpu": torch.allclose(model[0].weight.grad.cpu(), expected_grad, atol=1e-5),
    "generates_code": get_scheduling_for_device("foo") is not None,
}}))
"""


@pytest.mark.parametrize("simulation", SIMULATIONS)
def test_a_torch_that_differs_warns_once_and_still_compiles(device: str, simulation: str) -> None:
    code, problem = SIMULATIONS[simulation]
    outcome = _run_child(CHILD.format(simulation=textwrap.dedent(code)))
    assert outcome["imported_by_torch"] == []
    assert len(outcome["warnings"]) == 1, outcome["warnings"]
    assert problem in outcome["warnings"][0]
    assert outcome["matches_cpu"]
    assert outcome["grad_matches_cpu"]
    # Only a changed entry point keeps code generation (its failures go unexplained).
    assert outcome["generates_code"] == (simulation == "entry point changed")


def test_the_cache_key_covers_every_file_of_the_package(tmp_path: Path) -> None:
    package = Path(registration.__file__).parent
    every_file = sorted(
        Path(root) / name
        for root, directories, names in os.walk(package)
        if "__pycache__" not in Path(root).parts
        for name in names
    )
    assert registration.integration_sources() == every_file
    copy = tmp_path / "inductor"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    unchanged = registration.revision_of(copy)
    assert unchanged == registration.integration_revision()
    for source in registration.integration_sources(copy):
        original = source.read_bytes()
        source.write_bytes(original + b"\n# changed\n")
        assert registration.revision_of(copy) != unchanged, source.name
        source.write_bytes(original)
    assert registration.revision_of(copy) == unchanged


def test_inductor_hashes_the_revision_into_its_cache_key(device: str) -> None:
    torch.compile(lambda x: x + 1)(torch.ones(2, device=device))
    from torch._inductor.codegen.common import get_custom_backend_pass_for_device

    assert (
        get_custom_backend_pass_for_device(device)
        .uuid()
        .startswith(registration.integration_revision())
    )


def test_a_cached_graph_is_not_served_to_another_thread_count(device: str) -> None:
    """Inductor writes an OpenMP parallel region into a kernel compiled under more
    than one thread, and keys its cache on the thread count only for CPU graphs."""
    from torch._inductor.utils import run_and_get_code

    def kernel(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * 2).cos()

    x = torch.randn(4096, device=device)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        _, (parallel,) = run_and_get_code(torch.compile(kernel), x)
        torch._dynamo.reset()
        torch.set_num_threads(1)
        _, (serial,) = run_and_get_code(torch.compile(kernel), x)
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()
    assert "#pragma omp parallel" in parallel
    assert "#pragma omp parallel" not in serial


def _documented_table() -> str:
    def row(internal: TorchInternal) -> str:
        versions = ", ".join(internal.verified)
        return f"| `{internal.symbol}` | {internal.why} | {internal.check.value} | {versions} |"

    header = "| torch symbol | why | checked by | verified against |\n| --- | --- | --- | --- |"
    return "\n\n".join(
        [
            "Replaced (`replacements.REPLACED`):",
            "\n".join([header, *map(row, replacements.REPLACED)]),
            "Called or overridden by the registration (`replacements.RELIED_ON`):",
            "\n".join([header, *map(row, replacements.RELIED_ON)]),
        ]
    )


def test_the_documented_table_is_the_modules_table() -> None:
    start, end = "<!-- torch-internals:start -->", "<!-- torch-internals:end -->"
    text = COMPILE_MD.read_text()
    documented = text[text.index(start) + len(start) : text.index(end)].strip()
    assert documented == _documented_table(), (
        f"docs/compile.md's table is out of date; between the markers it should read:\n\n"
        f"{_documented_table()}"
    )
