"""Regenerates the conformance matrix in docs/conformance.md and prints the OpInfo table.

    uv run python tools/conformance_matrix.py                 # runs `torchplug check` per device
    uv run python tools/conformance_matrix.py --full          # every OpInfo sample (slow)
    uv run python tools/conformance_matrix.py --reports r/*.json  # from saved --json reports

Two tables: feature groups x devices, and per device and dtype the OpInfo
forward and backward pass rates (samples that match the CPU, of those the CPU
accepts) with the operators that crashed the process. Both are written between
the matrix markers of docs/conformance.md, so the page always shows what the
last run measured; the OpInfo table is also printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "conformance.md"
START, END = "<!-- conformance-matrix:start -->", "<!-- conformance-matrix:end -->"
WORKSPACE_DEVICES = {"foo": "torch_foo", "hpu": "vhabana_frameworks", "npu": "torch_vnpu"}


def installed_devices() -> list[str]:
    devices = []
    for device, distribution in WORKSPACE_DEVICES.items():
        try:
            metadata.distribution(distribution)
        except metadata.PackageNotFoundError:
            continue
        devices.append(device)
    return devices


def measure(device: str, full: bool) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "torchplug.cli", "check", device, "--json"]
        + (["--full"] if full else []),
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if result.returncode not in (0, 1):
        raise SystemExit(f"torchplug check {device} failed:\n{result.stderr}")
    return json.loads(result.stdout)


def cell(counts: dict | None) -> str:
    if counts is None:
        return "-"
    parts = [f"{counts['passed'] + counts['newly_passing']} pass"]
    for key, label in (("expected_failure", "xfail"), ("failed", "**FAIL**"), ("skipped", "skip")):
        if counts[key]:
            parts.append(f"{counts[key]} {label}")
    return ", ".join(parts)


def matrix(reports: list[dict]) -> str:
    devices = [report["device"] for report in reports]
    groups = sorted({group for report in reports for group in report["groups"]})
    lines = [
        "| feature group | " + " | ".join(f"`{device}`" for device in devices) + " |",
        "|---|" + "---|" * len(devices),
    ]
    for group in groups:
        cells = [cell(report["groups"].get(group)) for report in reports]
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    lines += ["", opinfo_table(reports), ""]
    lines += ["Expected failures by cause (tests per reason, most frequent first):", ""]
    for report in reports:
        causes = Counter(entry["reason"] for entry in report["expected_failures"]).most_common()
        lines.append(f"- `{report['device']}`:")
        lines += [f"  - {count}: {reason}" for reason, count in causes]
    return "\n".join(lines)


def rate(figures: dict | None) -> str:
    if not figures or not figures["samples"]:
        return "-"
    return f"{100 * figures['pass_rate']:.2f}% ({figures['samples_passed']}/{figures['samples']})"


def opinfo_table(reports: list[dict]) -> str:
    """OpInfo pass rates and crashes per device and dtype, then the crashing operators."""
    lines = [
        "| device | dtype | forward | backward | crashes |",
        "|---|---|---:|---:|---:|",
    ]
    for report in reports:
        forward = report["opinfo"].get("forward", {}).get("dtypes", {})
        backward = report["opinfo"].get("backward", {}).get("dtypes", {})
        for dtype in report["dtypes"]:
            crashes = sum(
                figures.get(dtype, {}).get("crashes", 0) for figures in (forward, backward)
            )
            lines.append(
                f"| `{report['device']}` | {dtype} | {rate(forward.get(dtype))} | "
                f"{rate(backward.get(dtype))} | {crashes} |"
            )
    sweeps = ", ".join(
        sorted({"every sample" if report["full"] else "sampled" for report in reports})
    )
    lines += ["", f"OpInfo samples that match the CPU, of those the CPU accepts ({sweeps})."]
    crashed = [
        f"- `{report['device']}`: {crash['mode']} `{crash['op']}` {crash['dtype']}: {crash['crash']}"
        for report in reports
        for crash in report["crashes"]
    ]
    lines += ["Operators that crashed the process:" if crashed else "No operator crashed."]
    lines += crashed
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", nargs="*", help="saved `torchplug check --json` reports")
    parser.add_argument("--full", action="store_true", help="every OpInfo sample (slow)")
    args = parser.parse_args()
    if args.reports:
        reports = [json.loads(Path(path).read_text()) for path in args.reports]
    else:
        reports = [measure(device, args.full) for device in installed_devices()]
    print(opinfo_table(reports))
    page = PAGE.read_text()
    before, rest = page.split(START, 1)
    _, after = rest.split(END, 1)
    PAGE.write_text(f"{before}{START}\n{matrix(reports)}\n{END}{after}")
    print(f"updated {PAGE.relative_to(ROOT)} for {', '.join(r['device'] for r in reports)}")


if __name__ == "__main__":
    main()
