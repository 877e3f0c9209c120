"""The ``torchplug`` command."""

from __future__ import annotations

import argparse
import sys


def _doctor(args: argparse.Namespace) -> int:
    from torchplug import doctor

    sys.stdout.write(doctor.run(as_json=args.json) + "\n")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
