"""The ``torchplug`` command."""

from __future__ import annotations

import argparse
import sys


def _doctor(args: argparse.Namespace) -> int:
    from torchplug import doctor

    sys.stdout.write(doctor.run(as_json=args.json) + "\n")
    return 0


BENCHMARKS = ("mlp", "tiny", "copy", "allreduce", "import", "zoo")


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


def _check(args: argparse.Namespace) -> int:
    try:
        from torchplug_testing import check
    except ImportError as error:
        raise SystemExit(
            "torchplug check needs the conformance suite, which is not installed: "
            f"pip install torchplug-testing ({error})"
        ) from error
    from torchplug import loader

    # A PrivateUse1 backend that is not this environment's default owner gets
    # the key in the child process only.
    device = args.device.split(":")[0]
    extra_env = (
        {"TORCHPLUG_PRIVATEUSE1": device} if device in loader.privateuse1_candidates() else {}
    )
    return check.main(
        device,
        full=args.full,
        as_json=args.json,
        markdown=args.markdown,
        expectations=args.expectations,
        workers=args.workers,
        extra_env=extra_env,
        pytest_args=args.pytest_args,
        timeout=args.timeout,
    )


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
    check = commands.add_parser(
        "check",
        help="conformance suite: every feature and OpInfo operator on DEVICE vs the CPU",
        description="Runs the torchplug-testing conformance suite for DEVICE in a child pytest "
        "process and prints a summary per feature group. Arguments after -- go to pytest.",
    )
    check.add_argument("device", help="device type to check, e.g. foo, hpu, npu")
    check.add_argument("--json", action="store_true", help="print the JSON report")
    check.add_argument("--markdown", metavar="FILE", help="also write a Markdown report to FILE")
    check.add_argument(
        "--full", action="store_true", help="every OpInfo sample (default: a fixed sample)"
    )
    check.add_argument(
        "--expectations",
        metavar="FILE",
        help="expectation file of known failures (default: the one the backend ships)",
    )
    check.add_argument("--workers", type=int, help="pytest-xdist workers (default: up to 2)")
    check.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds before the run is abandoned"
    )
    check.set_defaults(handler=_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # `torchplug check foo -- -k autograd`: what follows -- is for pytest.
    split = argv.index("--") if "--" in argv else len(argv)
    parser = build_parser()
    args = parser.parse_args(argv[:split])
    args.pytest_args = argv[split + 1 :]
    if args.pytest_args and args.command != "check":
        parser.error(f"arguments after -- are only for `torchplug check`, not `{args.command}`")
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
