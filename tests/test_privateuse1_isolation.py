"""Two PrivateUse1 backends in one environment: the loser's tests run in an owner child process."""

import textwrap
from pathlib import Path

import pytest
import torch

import torchplug
from fresh_interpreter import run_python
from torchplug.backend import BackendState
from torchplug_testing.child import PytestRun, child_environment
from torchplug_testing.child import run_pytest as child_pytest


def test_npu_loses_privateuse1_in_the_workspace_and_says_how_to_get_it() -> None:
    assert torch._C._get_privateuse1_backend_name() == "foo"
    status = torchplug.statuses()["npu"]
    assert status.state is BackendState.LOST_PRIVATEUSE1
    assert "PrivateUse1 belongs to 'foo'" in status.reason
    assert "Set TORCHPLUG_PRIVATEUSE1=npu to use 'npu' instead." in status.reason
    assert not hasattr(torch, "npu")


def test_vendor_ops_of_an_inactive_backend_raise_the_reason() -> None:
    result = run_python(
        """
        import torch
        import torch_vnpu
        try:
            torch_vnpu.rms_norm(torch.ones(2), torch.ones(2))
        except RuntimeError as error:
            print(error)
        """,
        TORCHPLUG_PRIVATEUSE1="foo",
    )
    assert result.returncode == 0, result.stderr
    assert "operators are registered when the npu backend is active" in result.stdout
    assert "set TORCHPLUG_PRIVATEUSE1=npu to use 'npu' instead" in result.stdout


CONFTEST = """
from torchplug_testing.owner_process import run_in_owner_process

pytest_collection_modifyitems = run_in_owner_process("npu", __file__)
"""

OUTCOMES = """
import os

import pytest
import torch


def test_runs_where_npu_owns_privateuse1():
    assert os.environ["TORCHPLUG_PRIVATEUSE1"] == "npu"
    assert torch.ones(2, device="npu").sum().item() == 2


@pytest.mark.parametrize("count", [1, 3])
def test_parametrized(count):
    assert torch.ones(count, device="npu").sum().item() == count


def test_failure_is_reported_with_the_childs_report():
    assert torch.npu.device_count() == 99, "CHILD-FAILURE-MARKER"


def test_skip():
    pytest.skip("CHILD-SKIP-REASON")


@pytest.mark.xfail(strict=True, reason="CHILD-XFAIL-REASON")
def test_xfail():
    assert False
"""

CRASH = """
import os


def test_crashes_the_child():
    os._exit(3)


def test_never_reported():
    pass
"""


@pytest.fixture
def test_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "npu_tests"
    directory.mkdir()
    (directory / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (directory / "test_outcomes.py").write_text(textwrap.dedent(OUTCOMES))
    (directory / "test_crash.py").write_text(textwrap.dedent(CRASH))
    return directory


def run_pytest(directory: Path, *arguments: str, **env: str) -> PytestRun:
    """pytest on ``directory`` (or the paths of ``arguments``) with a clean environment."""
    environment = child_environment(drop=("TORCHPLUG_", "PYTEST_"), **env)
    return child_pytest(
        [str(directory), "-rA", *arguments], environment, cwd=directory.parent, timeout=600
    )


def test_each_inner_test_reports_its_own_outcome(test_dir: Path) -> None:
    result = run_pytest(test_dir)
    output = result.output
    assert result.returncode == 1, output
    assert "3 failed, 3 passed, 1 skipped, 1 xfailed" in output
    assert "PASSED npu_tests/test_outcomes.py::test_parametrized[3]" in output
    assert (
        "FAILED npu_tests/test_outcomes.py::test_failure_is_reported_with_the_childs_report"
        in output
    )
    assert "CHILD-FAILURE-MARKER" in output
    assert "[in a child process with TORCHPLUG_PRIVATEUSE1=npu]" in output
    assert "CHILD-SKIP-REASON" in output
    assert "CHILD-XFAIL-REASON" in output
    # A crashed child fails every test it did not report, with its output.
    assert "FAILED npu_tests/test_crash.py::test_never_reported" in output
    assert "exit code 3" in output


def test_selection_reaches_the_child(test_dir: Path) -> None:
    result = run_pytest(test_dir, "-k", "parametrized")
    output = result.output
    assert result.returncode == 0, output
    assert "2 passed, 6 deselected" in output


def test_owner_process_runs_the_tests_in_place(test_dir: Path) -> None:
    result = run_pytest(test_dir / "test_outcomes.py", TORCHPLUG_PRIVATEUSE1="npu")
    output = result.output
    assert "1 failed, 3 passed, 1 skipped, 1 xfailed" in output
    assert "in a child process" not in output
