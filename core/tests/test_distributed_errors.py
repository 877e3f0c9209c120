"""Errors of distributed runs on simulated devices are reported, never hang."""

from __future__ import annotations

from pathlib import Path

from distributed_launch import assert_ok, run_ranks


def test_mismatched_sizes_and_dtypes_raise_on_every_rank(tmp_path: Path) -> None:
    """Gloo alone aborts the receiving rank; the backend's shape agreement raises instead."""
    ranks = run_ranks(["mismatched_sizes"], "foo", tmp_path)
    assert_ok(ranks, "mismatched_sizes")
    for rank in ranks:
        size_error, dtype_error = rank.errors("mismatched_sizes")
        assert "all_reduce needs tensors of the same dtype and shape on every rank" in size_error
        assert "rank 0: ALLREDUCE of Float[4]" in size_error
        assert "rank 1: ALLREDUCE of Float[5]" in size_error
        assert "rank 1: ALLREDUCE of Double[4]" in dtype_error
        assert "SUM: 8.0" in rank.section("mismatched_sizes")


def test_mismatched_sizes_are_named_in_debug_mode(tmp_path: Path) -> None:
    ranks = run_ranks(["mismatched_sizes"], "foo", tmp_path, TORCH_DISTRIBUTED_DEBUG="DETAIL")
    assert_ok(ranks, "mismatched_sizes")
    for rank in ranks:
        error, _ = rank.errors("mismatched_sizes")
        assert "Detected mismatch between collectives on ranks" in error
        assert "TensorShape=[4]" in error
        assert "TensorShape=[5]" in error


def test_a_dead_rank_is_reported(tmp_path: Path) -> None:
    survivor, dead = run_ranks(["dead_rank"], "foo", tmp_path)
    assert dead.returncode == 3
    assert survivor.ok("dead_rank"), survivor.output
    (error,) = survivor.errors("dead_rank")
    assert "Connection" in error or "timed out" in error.lower()
