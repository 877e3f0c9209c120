"""The pytest plugin: inert without a device, clear errors for bad input, groups in the report."""

import pytest

from torchplug_testing.plugin import SUITE_DIR


def test_without_device_the_suite_is_not_collected(run_suite) -> None:
    run = run_suite("--collect-only", "-q", str(SUITE_DIR))
    assert run.report is None
    assert "no tests" in run.result.stdout, run.result.stdout[-2000:]


def test_unknown_device_is_a_usage_error(run_suite) -> None:
    run = run_suite("--device", "warp")
    assert run.result.returncode == 4
    assert "not a device type torch knows" in run.result.stderr


def test_device_from_the_environment(run_suite) -> None:
    run = run_suite(
        str(SUITE_DIR / "creation.py"),
        "-k",
        "test_ranges_and_literals",
        env={"TORCHPLUG_TEST_DEVICE": "foo"},
    )
    assert run.result.returncode == 0, run.result.stdout[-2000:]
    assert run.report["device"] == "foo"
    assert run.report["groups"]["creation"]["passed"] == 1


def test_missing_expectation_file_is_a_usage_error(run_suite, tmp_path) -> None:
    run = run_suite("--device", "foo", "--expectations", str(tmp_path / "absent.toml"))
    assert run.result.returncode == 4
    assert "does not exist" in run.result.stderr


def test_listed_failures_are_expected_and_passes_are_reported_as_new(run_suite, tmp_path) -> None:
    listed = tmp_path / "expectations.toml"
    listed.write_text(
        """
        [[expected_failure]]
        test = "creation::test_ranges_and_literals"
        reason = "claimed broken, actually works"

        [[expected_failure]]
        test = "errors::test_never_written"
        reason = "stale entry"
        """.replace("        ", "")
    )
    # One whole suite module (no -k): staleness is judged.
    run = run_suite(
        "--device", "foo", "--expectations", str(listed), str(SUITE_DIR / "creation.py")
    )
    assert run.result.returncode == 0, run.result.stdout[-2000:]
    assert run.report["newly_passing"] == [
        {"test": "creation::test_ranges_and_literals", "reason": "claimed broken, actually works"}
    ]
    assert run.report["stale_expectations"] == ["errors::test_never_written"]
    assert "now pass; remove them" in run.result.stdout


@pytest.mark.parametrize("device", ["foo", "hpu"])
def test_pytorch_device_type_tests_run_on_the_backend(run_suite, tmp_path, device: str) -> None:
    nothing_expected = tmp_path / "none.toml"
    nothing_expected.write_text("")
    run = run_suite(
        "--device",
        device,
        "--expectations",
        str(nothing_expected),
        "-v",
        str(SUITE_DIR / "device_type.py"),
    )
    assert run.result.returncode == 0, run.result.stdout[-3000:]
    # test_add_and_compare x 2 dtypes + 2 more, instantiated for this device only.
    assert run.report["groups"]["device_type"]["passed"] == 4
    base = "PRIVATEUSE1" if device == "foo" else "HPU"
    line = f"TestDeviceGeneric{base}::test_add_and_compare_{device}_float32 PASSED"
    assert line in run.result.stdout, run.result.stdout[-3000:]
