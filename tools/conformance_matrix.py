"""Regenerates the conformance matrix (feature groups x devices) in docs/conformance.md.

    uv run python tools/conformance_matrix.py                 # runs `torchplug check` per device
    uv run python tools/conformance_matrix.py --reports r/*.json  # from saved --json reports

The table is written between the matrix markers of docs/conformance.md, so the
page always shows what the last run measured.
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


def measure(device: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "torchplug.cli", "check", device, "--json"],
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
    lines.append("")
    for report in reports:
        figures = [
            f"{mode} {f['samples_passed']}/{f['samples']} samples "
            f"({100 * f['pass_rate']:.1f}%) over {f['operators']} operators"
            for mode, f in report["opinfo"].items()
            if f["samples"]
        ]
        lines.append(
            f"- `{report['device']}` (torch {report['torch_version']}, "
            f"{'full' if report['full'] else 'sampled'} sweep): OpInfo float32 "
            + "; ".join(figures)
        )
    lines += ["", "Expected failures by cause (tests per reason, most frequent first):", ""]
    for report in reports:
        causes = Counter(entry["reason"] for entry in report["expected_failures"]).most_common()
        lines.append(f"- `{report['device']}`:")
        lines += [f"  - {count}: {reason}" for reason, count in causes]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", nargs="*", help="saved `torchplug check --json` reports")
    args = parser.parse_args()
    if args.reports:
        reports = [json.loads(Path(path).read_text()) for path in args.reports]
    else:
        reports = [measure(device) for device in installed_devices()]
    page = PAGE.read_text()
    before, rest = page.split(START, 1)
    _, after = rest.split(END, 1)
    PAGE.write_text(f"{before}{START}\n{matrix(reports)}\n{END}{after}")
    print(f"updated {PAGE.relative_to(ROOT)} for {', '.join(r['device'] for r in reports)}")


if __name__ == "__main__":
    main()
