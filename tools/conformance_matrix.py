"""Regenerates the conformance matrix in docs/conformance.md and prints the OpInfo table.

    uv run python tools/conformance_matrix.py                 # runs `torchplug check` per device
    uv run python tools/conformance_matrix.py --full          # every OpInfo sample (slow)
    uv run python tools/conformance_matrix.py --reports r/*.json  # from saved --json reports

Two tables: feature groups x devices, and per device and dtype the OpInfo
forward and backward pass rates (samples that match the CPU, of those the CPU
accepts) with the operators that crashed the process. Both are written between
the matrix markers of docs/conformance.md, so the page always shows what the
last run measured; the OpInfo table is also printed.

:func:`page_structure` and :func:`expected_structure` give what a test
compares: the page's groups, devices and dtypes against the suite's modules,
the workspace's devices and the sweep's dtypes, not the measured counts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

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
        lines.append(f"- `{report['device']}`:" + ("" if causes else " none"))
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


def suite_groups() -> list[str]:
    """The suite's feature groups: one per module of torchplug_testing's suite."""
    from torchplug_testing.plugin import SUITE_DIR

    return sorted(path.stem for path in SUITE_DIR.glob("*.py") if not path.stem.startswith("_"))


def _table(lines: list[str], header: str) -> list[list[str]]:
    """The rows (cells) of the Markdown table of ``lines`` whose header starts with ``header``."""
    rows: list[list[str]] = []
    for line in lines:
        if rows and not line.startswith("|"):
            break
        if line.startswith(header) or (rows and not line.startswith("|---")):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def page_structure(page: str) -> dict[str, Any]:
    """What the page's tables are made of: the groups its description table
    lists, and the matrix's columns and rows without their counts."""
    lines = page.splitlines()
    _, _, generated = page.partition(START)
    generated_lines = generated.partition(END)[0].splitlines()
    groups = _table(generated_lines, "| feature group |")
    opinfo = _table(generated_lines, "| device | dtype |")
    return {
        "described groups": sorted(row[0].strip("`") for row in _table(lines, "| group |")[1:]),
        "matrix columns": groups[0] if groups else [],
        "matrix groups": [row[0] for row in groups[1:]],
        "opinfo columns": opinfo[0] if opinfo else [],
        "opinfo rows": [tuple(row[:2]) for row in opinfo[1:]],
    }


def expected_structure(devices: list[str]) -> dict[str, Any]:
    """What :func:`page_structure` reads after this tool has run for ``devices``."""
    from torchplug_testing.plugin import OPINFO_DTYPES

    groups = suite_groups()
    empty_counts = dict.fromkeys(
        ("passed", "newly_passing", "expected_failure", "failed", "skipped"), 0
    )
    reports = [
        {
            "device": device,
            "groups": dict.fromkeys(groups, empty_counts),
            "opinfo": {},
            "dtypes": OPINFO_DTYPES.split(","),
            "full": False,
            "crashes": [],
            "expected_failures": [],
        }
        for device in devices
    ]
    structure = page_structure(f"{START}\n{matrix(reports)}\n{END}")
    structure["described groups"] = groups
    return structure


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
