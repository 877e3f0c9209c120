"""tools/bench_stable_abi.py builds its C++-ABI baseline and compares like with like.

No timing is asserted (figures go in the closing notes); the test checks the
benchmark runs on the installed torch, times every case in both pinnings and
both modes, and that both sides compute the same values.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TOOL = Path(__file__).resolve().parents[1] / "tools" / "bench_stable_abi.py"


def test_the_stable_abi_benchmark_times_both_builds_on_the_same_work() -> None:
    result = subprocess.run(
        [sys.executable, TOOL, "--rounds", "1", "--sizes", "4,4096", "--json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout)
    cases = {(r["pinned"], r["mode"], r["operator"], r["numel"]) for r in rows}
    assert cases == {
        (pinned, mode, operator, numel)
        for pinned in (False, True)
        for mode in ("grad", "inference")
        for operator in ("fast_gelu", "rms_norm")
        for numel in (4, 4096)
    }
    assert all(row["equal"] for row in rows), [r for r in rows if not r["equal"]]
    assert all(row["stable_us"] > 0 and row["cxx_abi_us"] > 0 for row in rows)
