"""``torchplug bench``: the subcommand this package adds to the ``torchplug`` CLI.

Declared in the ``torchplug.commands`` entry-point group, which the CLI
reads; the benchmarks themselves (and torch) are imported only when the
command runs.
"""

from __future__ import annotations

import argparse
import sys

BENCHMARKS = ("mlp", "tiny", "copy", "allreduce", "import", "zoo", "compile")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the ``bench`` subcommand to the ``torchplug`` command's subparsers."""
    bench = subparsers.add_parser(
        "bench", help="speed targets: device vs CPU, import time vs bare torch"
    )
    bench.add_argument(
        "--device", help="device to measure (default: the first active torchplug backend)"
    )
    bench.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    bench.add_argument(
        "--rounds", type=int, default=7, help="interleaved rounds; medians are reported"
    )
    bench.add_argument("--no-pin", action="store_true", help="do not pin the process to one core")
    bench.add_argument("--json", action="store_true")
    bench.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the benchmarks ``args`` selects and prints their figures."""
    import torchplug_bench

    only = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = sorted(set(only) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(
            f"Unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}."
        )
    sys.stdout.write(
        torchplug_bench.run(args.device, only, args.rounds, args.json, pin=not args.no_pin) + "\n"
    )
    return 0
