"""`torchplug check` reports the operators its run sent through the CPU fallback,
gathered from every process of the run."""

from __future__ import annotations

from typing import Any

from torchplug_testing import check, fallback
from torchplug_testing.plugin import SUITE_DIR


def test_the_report_holds_the_operators_the_guard_workers_ran(run_suite) -> None:
    # Two xdist workers; the sweep runs in the crash guard's worker of one of them.
    erfinv = f"{SUITE_DIR / 'opinfo_forward.py'}::test_forward[erfinv-float32]"
    run = run_suite("--device", "foo", "--dtypes", "float32", "-n", "2", erfinv)
    assert run.result.returncode == 0, run.result.stdout[-3000:]
    report = {row["operator"]: row for row in run.report["fallback"]}
    row = report["aten::erfinv"]
    samples = run.report["opinfo"]["forward"]["dtypes"]["float32"]["samples"]
    assert row["calls"] >= samples > 0
    assert row["bytes"] > 0
    assert row["seconds"] > 0
    assert not {"aten::mm", "aten::add.Tensor"} & set(report), report


def _row(operator: str, calls: int, size: int, seconds: float) -> dict[str, Any]:
    return {"operator": operator, "calls": calls, "bytes": size, "seconds": seconds}


def test_reports_are_summed_per_operator_the_most_time_first() -> None:
    merged = fallback.merge(
        [
            [_row("aten::erfinv", 2, 64, 0.5), _row("aten::sort", 1, 8, 0.25)],
            None,  # a worker that crashed
            [_row("aten::sort", 3, 24, 0.5)],
        ]
    )
    assert merged == [_row("aten::sort", 4, 32, 0.75), _row("aten::erfinv", 2, 64, 0.5)]
    assert fallback.merge([None, None]) is None


def _report(rows: list[dict[str, Any]] | None) -> dict[str, Any]:
    empty: list[dict[str, Any]] = []
    return {
        "device": "foo",
        "torch_version": "2.15.0",
        "suite_version": "0.1.0",
        "dtypes": ["float32"],
        "full": False,
        "expectations": None,
        "groups": {
            "opinfo_forward": {
                "passed": 1,
                "failed": 0,
                "expected_failure": 0,
                "newly_passing": 0,
                "skipped": 0,
            }
        },
        "crashes": empty,
        "unexpected_failures": empty,
        "expected_failures": empty,
        "newly_passing": empty,
        "stale_expectations": empty,
        "fallback": rows,
    }


def test_the_summary_shows_the_top_operators_with_calls_and_bytes() -> None:
    rows = [_row(f"aten::op{i}", i + 1, (i + 1) << 20, 1.0 - i / 100) for i in range(12)]
    text = check.text_summary(_report(rows))
    assert (
        "operators that ran on the CPU fallback of 'foo' (12; the 10 that took the most time)"
        in text
    )
    assert "     1000.00         1       1.00  aten::op0" in text
    assert "aten::op9" in text
    assert "aten::op10" not in text
    assert "| 1000.00 | 1 | 1048576 | `aten::op0` |" in check.markdown_report(_report(rows))


def test_the_summary_says_when_nothing_fell_back_and_is_silent_without_a_report() -> None:
    assert "no operator ran on the CPU fallback of 'foo'" in check.text_summary(_report([]))
    assert "CPU fallback" not in check.text_summary(_report(None))
