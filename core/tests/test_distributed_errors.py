"""Errors of distributed runs on simulated devices are reported, never hang."""

from __future__ import annotations

from pathlib import Path

from distributed_launch import assert_ok, run_ranks


def mismatched_sizes_errors(tmp_path: Path, **env: str) -> list[list[str]]:
    """Every rank's (size error, dtype error) of the mismatched-sizes scenario; it finishes."""
    ranks = run_ranks(["mismatched_sizes"], "foo", tmp_path, **env)
    assert_ok(ranks, "mismatched_sizes")
    for rank in ranks:
        assert "SUM: 8.0" in rank.section("mismatched_sizes")
    return [rank.errors("mismatched_sizes") for rank in ranks]


def test_mismatched_sizes_and_dtypes_raise_on_every_rank(tmp_path: Path) -> None:
    """Gloo alone aborts the receiving rank; the backend's shape agreement raises instead."""
    for size_error, dtype_error in mismatched_sizes_errors(tmp_path):
        assert "all_reduce needs tensors of the same dtype and shape on every rank" in size_error
        assert "rank 0: ALLREDUCE of Float[4]" in size_error
        assert "rank 1: ALLREDUCE of Float[5]" in size_error
        assert "rank 1: ALLREDUCE of Double[4]" in dtype_error


def test_mismatched_sizes_are_named_in_debug_mode(tmp_path: Path) -> None:
    for size_error, _ in mismatched_sizes_errors(tmp_path, TORCH_DISTRIBUTED_DEBUG="DETAIL"):
        assert "Detected mismatch between collectives on ranks" in size_error
        assert "TensorShape=[4]" in size_error
        assert "TensorShape=[5]" in size_error


def test_a_dead_rank_is_reported(tmp_path: Path) -> None:
    survivor, dead = run_ranks(["dead_rank"], "foo", tmp_path)
    assert dead.returncode == 3
    assert survivor.ok("dead_rank"), survivor.output
    (error,) = survivor.errors("dead_rank")
    assert "Connection" in error or "timed out" in error.lower()
