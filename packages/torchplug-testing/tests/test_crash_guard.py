"""Kernels that kill or hang the process fail their own test; the run goes on and lists them."""

import textwrap

import pytest

from torchplug_testing.plugin import SUITE_DIR

# Three PrivateUse1 kernels replaced, for the child processes only: one
# segfaults, one aborts, one never returns.
CRASHING_KERNELS = textwrap.dedent(
    """
    import ctypes
    import os
    import time

    import torch

    _library = torch.library.Library("aten", "IMPL")


    def _segfault(*args, **kwargs):
        ctypes.string_at(0)


    def _abort(*args, **kwargs):
        os.abort()


    def _hang(*args, **kwargs):
        time.sleep(3600)


    _library.impl("abs", _segfault, "PrivateUse1")
    _library.impl("exp", _abort, "PrivateUse1")
    _library.impl("neg", _hang, "PrivateUse1")
    """
)


def suite_tests(module: str, test: str, *cases: str) -> list[str]:
    """The node ids of ``test`` in the suite module ``module`` for each parameter case."""
    return [f"{SUITE_DIR / module}::{test}[{case}]" for case in cases]


FORWARD_ABS_ADD_NEG = suite_tests(
    "opinfo_forward.py", "test_forward", "abs-float32", "add-float32", "neg-float32"
)


@pytest.fixture
def run_with_plugin(run_suite, child_plugin):
    """Runs the suite on foo in a child pytest that loads ``source`` as the plugin ``name``."""

    def run(name: str, source: str, *args: str):
        return run_suite("--device", "foo", "-p", name, *args, env=child_plugin(name, source))

    return run


def test_crashes_and_hangs_are_failures_of_their_tests(run_with_plugin) -> None:
    run = run_with_plugin(
        "crashing_kernels",
        CRASHING_KERNELS,
        *["--dtypes", "float32", "--op-timeout", "5", "-n", "2", "--dist", "loadfile"],
        *FORWARD_ABS_ADD_NEG,
        *suite_tests("opinfo_backward.py", "test_backward", "exp-float32"),
    )
    # Failed tests, not a crashed run (pytest's exit status 1, a report written).
    assert run.result.returncode == 1, run.result.stdout[-3000:]
    crashes = {crash["test"]: crash["crash"] for crash in run.report["crashes"]}
    assert crashes == {
        "opinfo_forward::test_forward[abs-float32]": "killed by SIGSEGV",
        "opinfo_forward::test_forward[neg-float32]": "no progress for 5 s (hung; the worker was killed)",
        "opinfo_backward::test_backward[exp-float32]": "killed by SIGABRT",
    }
    failed = {entry["test"]: entry["message"] for entry in run.report["unexpected_failures"]}
    assert set(failed) == set(crashes)
    assert (
        "abs forward in float32 on foo crashed the process running it: killed by SIGSEGV on sample 0"
        in failed["opinfo_forward::test_forward[abs-float32]"]
    )
    # The worker was restarted after the crash: the next operator ran and passed.
    assert run.outcome_of("opinfo_forward::test_forward[add-float32]") == "passed"
    assert run.report["opinfo"]["forward"]["dtypes"]["float32"]["crashes"] == 2
    # faulthandler's traceback from the worker names the kernel that crashed.
    assert "in _segfault" in run.result.stdout


def test_without_the_guard_operators_run_in_the_test_process(run_suite) -> None:
    # For debuggers: the sweep runs in the test process and is reported the same way.
    run = run_suite(
        *["--device", "foo", "--no-crash-guard", "--dtypes", "float32", "-n", "0"],
        *suite_tests("opinfo_forward.py", "test_forward", "add-float32"),
    )
    assert run.result.returncode == 0, run.result.stdout[-3000:]
    figures = run.report["opinfo"]["forward"]["dtypes"]["float32"]
    assert (figures["operators"], figures["samples"], figures["crashes"]) == (1, 3, 0)


def test_a_worker_that_cannot_start_fails_the_sweep_tests(run_with_plugin) -> None:
    run = run_with_plugin(
        "no_worker",
        "import sys\n"
        "if '--opinfo-worker' in sys.argv:\n"
        "    raise SystemExit('this environment cannot start the worker')\n",
        *["--dtypes", "float32", "-n", "0"],
        *FORWARD_ABS_ADD_NEG,
    )
    assert run.result.returncode == 1, run.result.stdout[-3000:]
    messages = [entry["message"] for entry in run.report["unexpected_failures"]]
    assert len(messages) == 3
    assert all("could not start its worker process" in message for message in messages)
    # Not reported as operator crashes: no operator ran.
    assert run.report["crashes"] == []
    assert "this environment cannot start the worker" in run.result.stdout


SEGFAULTING_HARDSHRINK = textwrap.dedent(
    """
    import ctypes

    import torch

    _library = torch.library.Library("aten", "IMPL")
    _library.impl("hardshrink", lambda *args, **kwargs: ctypes.string_at(0), "PrivateUse1")
    """
)


def test_a_module_that_crashes_fails_its_own_test(run_with_plugin) -> None:
    """The ModuleInfo sweep shares the guard's worker: a crash is one module's failure."""
    run = run_with_plugin(
        "crashing_module",
        SEGFAULTING_HARDSHRINK,
        "-n",
        "0",
        *suite_tests(
            "moduleinfo_forward.py", "test_forward", "nn.Hardshrink-float32", "nn.Tanh-float32"
        ),
    )
    assert run.result.returncode == 1, run.result.stdout[-3000:]
    crashed = "moduleinfo_forward::test_forward[nn.Hardshrink-float32]"
    assert {crash["test"]: crash["crash"] for crash in run.report["crashes"]} == {
        crashed: "killed by SIGSEGV"
    }
    failed = {entry["test"]: entry["message"] for entry in run.report["unexpected_failures"]}
    assert set(failed) == {crashed}
    assert (
        "nn.Hardshrink forward in float32 on foo crashed the process running it" in failed[crashed]
    )
    assert run.outcome_of("moduleinfo_forward::test_forward[nn.Tanh-float32]") == "passed"
    figures = run.report["modules"]["forward"]["dtypes"]["float32"]
    assert (figures["operators"], figures["crashes"]) == (2, 1)
