"""The ``torchplug`` command."""

from __future__ import annotations

import argparse
import sys


def _doctor(args: argparse.Namespace) -> int:
    from torchplug import doctor

    sys.stdout.write(doctor.run(as_json=args.json) + "\n")
    return 0


BENCHMARKS = ("mlp", "tiny", "copy", "allreduce", "import")


def _bench(args: argparse.Namespace) -> int:
    from torchplug import bench

    only = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = sorted(set(only) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(
            f"Unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}."
        )
    sys.stdout.write(
        bench.run(args.device, only, args.rounds, args.json, pin=not args.no_pin) + "\n"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchplug", description="Out-of-tree PyTorch device backends."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser(
        "doctor", help="installed backends, their status and why any is inactive"
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output (stable keys)")
    doctor.set_defaults(handler=_doctor)
    bench = commands.add_parser(
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
    bench.set_defaults(handler=_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
