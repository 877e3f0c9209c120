"""``torchplug bench``: the subcommand this package adds to the ``torchplug`` CLI.

Declared in the ``torchplug.commands`` entry-point group, which the CLI
reads; the benchmarks themselves (and torch) are imported only when the
command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchplug_bench.targets import BENCHMARKS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the ``bench`` subcommand to the ``torchplug`` command's subparsers."""
    bench = subparsers.add_parser(
        "bench",
        help="speed targets: device vs CPU, import time vs bare torch",
        description="Measures every figure against its baseline in the same run, pinned to "
        "one core and unpinned, each in a fresh process, and prints them side by side. "
        "The exit status is 1 when a figure could not be measured.",
    )
    bench.add_argument(
        "--device", help="device to measure (default: the first active torchplug backend)"
    )
    bench.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    bench.add_argument(
        "--rounds", type=int, default=7, help="interleaved rounds; medians are reported"
    )
    pinning = bench.add_mutually_exclusive_group()
    pinning.add_argument("--pin", action="store_true", help="measure pinned to one core only")
    pinning.add_argument("--no-pin", action="store_true", help="measure unpinned only")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument(
        "--write-docs",
        metavar="PAGE",
        type=Path,
        help="rewrite PAGE's figures table (between <!-- bench:begin --> and <!-- bench:end -->) "
        "from a run of every benchmark, e.g. docs/performance.md",
    )
    bench.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the benchmarks ``args`` selects and prints their figures."""
    import torchplug_bench
    from torchplug_bench import docs_page

    only = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = sorted(set(only) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(
            f"Unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}."
        )
    if args.write_docs and (args.only or args.pin or args.no_pin):
        raise SystemExit(
            "--write-docs measures every benchmark, pinned and unpinned: drop --only, --pin and --no-pin."
        )
    pinnings = ["pinned"] if args.pin else ["unpinned"] if args.no_pin else ["pinned", "unpinned"]
    report = torchplug_bench.run(args.device, only, args.rounds, pinnings)
    sys.stdout.write((report.as_json() if args.json else report.as_text()) + "\n")
    if args.write_docs:
        command = f"torchplug bench --write-docs {args.write_docs} --rounds {args.rounds}"
        if args.device:
            command += f" --device {args.device}"
        docs_page.write_page(args.write_docs, report, command)
    return 1 if report.failed else 0
