"""Errors of distributed runs on simulated devices are reported, never hang."""

from __future__ import annotations

from pathlib import Path

from distributed_launch import assert_ok, run_ranks


def test_mismatched_sizes_abort_with_gloo_diagnosis(tmp_path: Path) -> None:
    ranks = run_ranks(["mismatched_sizes"], "foo", tmp_path)
    assert not any(
        rank.ok("mismatched_sizes") and not rank.errors("mismatched_sizes") for rank in ranks
    )
    combined = "\n".join(rank.output for rank in ranks)
    assert "Received data size doesn't match expected size" in combined


def test_mismatched_sizes_are_named_in_debug_mode(tmp_path: Path) -> None:
    ranks = run_ranks(["mismatched_sizes"], "foo", tmp_path, TORCH_DISTRIBUTED_DEBUG="DETAIL")
    assert_ok(ranks, "mismatched_sizes")
    for rank in ranks:
        (error,) = rank.errors("mismatched_sizes")
        assert "Detected mismatch between collectives on ranks" in error
        assert "TensorShape=[4]" in error
        assert "TensorShape=[5]" in error


def test_a_dead_rank_is_reported(tmp_path: Path) -> None:
    survivor, dead = run_ranks(["dead_rank"], "foo", tmp_path)
    assert dead.returncode == 3
    assert survivor.ok("dead_rank"), survivor.output
    (error,) = survivor.errors("dead_rank")
    assert "Connection" in error or "timed out" in error.lower()
