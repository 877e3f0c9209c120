"""The suite runs on a backend that is not built on torchplug: ``vanilla_backend.py``.

That backend (pure Python, PrivateUse1, CPU tensors behind wrapper tensors) has
a deliberately minimal device module. The suite must run it to the end: the
groups it supports pass, and each feature it lacks fails its own tests with a
message naming the missing function, never an error in a fixture.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import SuiteRun
from torchplug_testing import device_api
from torchplug_testing.child import child_environment, isolated_config, run_pytest
from torchplug_testing.plugin import SUITE_DIR

HERE = Path(__file__).resolve().parent
SWEPT_OPERATORS = ("add", "mul", "sum")
SELECTION = (
    *(str(SUITE_DIR / f"{group}.py") for group in ("creation", "errors", "memory", "streams")),
    *(str(SUITE_DIR / f"{group}.py") for group in ("rng", "autocast", "driver")),
    *(f"{SUITE_DIR / 'opinfo_forward.py'}::test_forward[{op}-float32]" for op in SWEPT_OPERATORS),
)
# What the vanilla backend lacks, and the message its tests must fail with.
MISSING = {
    "memory::test_allocation_is_counted_and_freed": "torch.vanilla.memory_allocated is missing",
    "memory::test_peak_and_reset": "torch.vanilla.reset_peak_memory_stats is missing",
    "memory::test_memory_info": "torch.vanilla.mem_get_info is missing",
    "streams::test_current_and_default_streams": (
        "torch.vanilla.current_stream is missing: the streams group needs it"
    ),
    "streams::test_synchronize_drains_every_stream": (
        "torch.vanilla.stream is missing: the streams group needs it"
    ),
    "errors::test_out_of_memory_is_reported_and_recoverable": (
        "torch.vanilla.get_device_properties is missing: the errors group needs it"
    ),
    "rng::test_rng_state_save_and_restore": (
        "torch.vanilla.manual_seed is missing: the rng group needs it"
    ),
    "autocast::test_autocast_matches_cpu": (
        "torch.vanilla.get_amp_supported_dtype is missing: the autocast group needs it"
    ),
}


@pytest.fixture(scope="module")
def vanilla_run(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """One child run of the selection on ``vanilla`` (the ``run_suite`` fixture's way)."""
    directory = tmp_path_factory.mktemp("vanilla")
    report = directory / "report.json"
    environment = child_environment(
        drop=("TORCHPLUG_", "PYTEST_"),
        # torchplug's foo would claim PrivateUse1 during `import torch`.
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]),
    )
    arguments = [*isolated_config(directory), "--conformance-report", str(report)]
    arguments += ["-p", "vanilla_backend", "--device", "vanilla", "-rfE", *SELECTION]
    result = run_pytest(arguments, environment, cwd=directory, timeout=600)
    return SuiteRun(result, json.loads(report.read_text()) if report.is_file() else None)


def test_the_run_completes_without_errors_or_crashes(vanilla_run: SuiteRun) -> None:
    output = vanilla_run.result.output
    assert vanilla_run.report is not None, output[-3000:]
    assert vanilla_run.result.returncode == 1, output[-3000:]  # failures, nothing worse
    assert "INTERNALERROR" not in output, output[-3000:]
    summary = vanilla_run.result.stdout.strip().splitlines()[-1]
    assert " failed" in summary, summary
    assert " error" not in summary, output[-5000:]  # no fixture errored
    assert vanilla_run.report["device"] == "vanilla"
    assert vanilla_run.report["crashes"] == []
    # Not a torchplug backend: no torch.vanilla.fallback_report, so no fallback report.
    assert vanilla_run.report["fallback"] is None


def test_supported_groups_pass(vanilla_run: SuiteRun) -> None:
    groups = vanilla_run.report["groups"]
    assert groups["creation"]["passed"] >= 29
    assert groups["creation"]["failed"] == 0, vanilla_run.report["unexpected_failures"]
    assert groups["opinfo_forward"]["passed"] == len(SWEPT_OPERATORS)
    figures = vanilla_run.report["opinfo"]["forward"]
    assert figures["samples"] > 0
    assert figures["samples_passed"] == figures["samples"]
    # It refuses a device index it does not have, and random numbers are drawn.
    assert vanilla_run.outcome_of("errors::test_invalid_device_index") == "passed"
    assert vanilla_run.outcome_of("rng::test_distributions_are_well_formed") == "passed"


def test_missing_functions_fail_their_tests_naming_them(vanilla_run: SuiteRun) -> None:
    failures = {
        entry["test"]: entry["message"] for entry in vanilla_run.report["unexpected_failures"]
    }
    for test_id, message in MISSING.items():
        assert message in failures.get(test_id, ""), (test_id, failures.get(test_id))
    # A real gap: CPU operands mixed with the device's are not refused.
    assert "DID NOT RAISE" in failures["errors::test_cpu_and_device_operands"]


def test_torchplug_only_and_two_device_tests_skip_with_the_reason(vanilla_run: SuiteRun) -> None:
    skipped = {entry["test"]: entry["message"] for entry in vanilla_run.report["skipped"]}
    driver = [message for test, message in skipped.items() if test.startswith("driver::")]
    assert driver
    assert vanilla_run.report["groups"]["driver"]["skipped"] == len(driver)
    assert all("not an active torchplug backend" in message for message in driver), driver
    assert skipped["memory::test_per_device_accounting"] == "needs 2 'vanilla' devices, 1 present"


def test_a_missing_function_is_named_with_its_group() -> None:
    assert device_api.missing_message("cpu", "no_such_function", "memory") == (
        "torch.cpu.no_such_function is missing: the memory group needs it"
    )
    assert device_api.missing_message("warp", "synchronize", None).startswith(
        "torch.warp is missing (the backend registered no device module"
    )
    module = device_api.DeviceModule("cpu", "streams")
    assert module.provides("synchronize")
    assert not module.provides("no_such_function")
    with pytest.raises(pytest.fail.Exception, match=r"torch\.cpu\.no_such_function is missing"):
        _ = module.no_such_function
