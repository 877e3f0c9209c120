"""A deliberately wrong kernel is caught: the suite (and `torchplug check`) report it."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from torchplug_testing.plugin import SUITE_DIR

# aten::add.Tensor on PrivateUse1 replaced by subtraction, for the child process only.
BROKEN_ADD = textwrap.dedent(
    """
    import torch

    _library = torch.library.Library("aten", "IMPL")


    def _wrong_add(self, other, *, alpha=1):
        return torch.ops.aten.sub.Tensor(self, other, alpha=alpha)


    _library.impl("add.Tensor", _wrong_add, "PrivateUse1")
    """
)
SELECTION = "add-float32 or test_type_promotion_matches_cpu"
MODULES = (str(SUITE_DIR / "creation.py"), str(SUITE_DIR / "opinfo_forward.py"))
ADD_TESTS = (
    "opinfo_forward::test_forward[add-float32]",
    "creation::test_type_promotion_matches_cpu",
)


@pytest.fixture
def broken_add(child_plugin) -> dict[str, str]:
    return child_plugin("broken_add", BROKEN_ADD)


def test_suite_reports_the_wrong_add(run_suite, broken_add) -> None:
    run = run_suite(
        "--device", "foo", "-p", "broken_add", "-k", SELECTION, *MODULES, env=broken_add
    )
    assert run.result.returncode == 1, run.result.stdout[-3000:]
    for test_id in ADD_TESTS:
        assert run.outcome_of(test_id) == "unexpected_failures", test_id
    sweep = next(e for e in run.report["unexpected_failures"] if e["test"] == ADD_TESTS[0])
    assert "differ from the CPU" in sweep["message"]


def test_same_selection_passes_with_the_real_kernel(run_suite) -> None:
    run = run_suite("--device", "foo", "-k", SELECTION, *MODULES)
    assert run.result.returncode == 0, run.result.stdout[-3000:]
    for test_id in ADD_TESTS:
        assert run.outcome_of(test_id) == "passed", test_id


def test_torchplug_check_fails_on_the_wrong_add(broken_add) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPLUG_")}
    environment.update(broken_add)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchplug.cli",
            "check",
            "foo",
            "--json",
            "--workers",
            "1",
            "--",
            "-p",
            "broken_add",
            "-k",
            SELECTION,
            *MODULES,
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    failed = {entry["test"] for entry in report["unexpected_failures"]}
    assert set(ADD_TESTS) <= failed
