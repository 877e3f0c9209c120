"""``torchplug check DEVICE``: the subcommand this package adds to the ``torchplug`` CLI.

Declared in the ``torchplug.commands`` entry-point group, which the CLI
reads; the suite itself (``check``) is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the ``check`` subcommand to the ``torchplug`` command's subparsers."""
    check = subparsers.add_parser(
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
    check.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the suite as ``args`` (with ``pytest_args``, what followed ``--``) asks."""
    # Only the torchplug command calls this, so torchplug is installed.
    import torchplug
    from torchplug_testing import check

    # A PrivateUse1 backend that is not this environment's default owner gets
    # the key in the child process only.
    device = args.device.split(":")[0]
    extra_env = (
        {"TORCHPLUG_PRIVATEUSE1": device} if device in torchplug.privateuse1_candidates() else {}
    )
    try:
        report = check.run_suite(
            device,
            full=args.full,
            expectations=args.expectations,
            workers=args.workers,
            extra_env=extra_env,
            pytest_args=args.pytest_args,
            timeout=args.timeout,
        )
    except check.CheckError as error:
        sys.stderr.write(f"torchplug check: {error}\n")
        return 2
    return check.show(report, as_json=args.json, markdown=args.markdown)
