"""``python -m torchplug_testing.driver LIBRARY``: the conformance checks of a driver library,
a PASS/FAIL/SKIP line each. Exits with 0 when none failed, 1 when one did, 2 when the
library is not a usable driver."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from torchplug_testing.driver.harness import CHECKS
from torchplug_testing.driver.loader import DriverLoadError
from torchplug_testing.driver.runner import (
    DEFAULT_NAME,
    DEFAULT_TIMEOUT,
    CheckResult,
    Status,
    run_conformance,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torchplug_testing.driver",
        description="Checks a torchplug driver library (torchplug/driver.h) against the interface.",
    )
    parser.add_argument("library", nargs="?", help="path of the driver's shared library")
    parser.add_argument("--name", default=DEFAULT_NAME, help="backend name given to client_create")
    parser.add_argument("--options", help="client_create options, 'key=value;key=value'")
    parser.add_argument(
        "--check",
        action="append",
        dest="checks",
        metavar="CHECK",
        help="run only this check (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds before a check that does not finish fails",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for check in CHECKS.values():
            sys.stdout.write(f"{check.name:<36} {check.description}\n")
        return 0
    if args.library is None:
        parser.error("the driver library is required")

    def row(result: CheckResult) -> None:
        detail = result.detail.replace("\n", "\n" + " " * 50)
        sys.stdout.write(f"{result.status:<5} {result.name:<36} {result.seconds:6.2f}s  {detail}\n")
        sys.stdout.flush()

    try:
        results = run_conformance(
            args.library,
            args.name,
            options=args.options,
            checks=args.checks,
            timeout=args.timeout,
            on_result=None if args.json else row,
        )
    except (DriverLoadError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    counts = {status: sum(r.status is status for r in results) for status in Status}
    if args.json:
        sys.stdout.write(json.dumps([asdict(result) for result in results], indent=2) + "\n")
    else:
        sys.stdout.write(
            ", ".join(f"{count} {status.name.lower()}" for status, count in counts.items()) + "\n"
        )
    return 1 if counts[Status.FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
