"""Running the checks in child processes, so that a driver that crashes or hangs fails the
check it was running instead of ending the run.

One child runs the checks in order and reports each start and result as a JSON line. When
it dies or a check outlives the timeout, the check it was running fails, and a new child
goes on with the checks after it.
"""

from __future__ import annotations

import enum
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from torchplug_testing.driver.harness import CHECKS, Check, CheckFailure, Context, Skip
from torchplug_testing.driver.loader import Driver, DriverError, DriverLoadError, load

# Any name suits the simulator, which makes devices for each name; a vendor's driver
# may know only its own backend's name (--name).
DEFAULT_NAME = "conformance"
DEFAULT_TIMEOUT = 30.0
_CHILD = "from torchplug_testing.driver.runner import child_main; child_main()"
# Imported to register their checks, in the order they run: the basics first.
CHECK_MODULES = (
    "checks_device",
    "checks_copies",
    "checks_streams",
    "checks_errors",
    "checks_extensions",
    "checks_kernels",
    "checks_graphs",
)
for _module in CHECK_MODULES:
    importlib.import_module(f"torchplug_testing.driver.{_module}")


class Status(enum.StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    seconds: float


def run_check(driver: Driver, check: Check, name: str, options: str | None) -> CheckResult:
    """Runs ``check`` in this process with a client of its own."""
    started = time.monotonic()
    ctx: Context | None = None
    try:
        ctx = Context(driver, name, options)
        note = check.function(ctx)
        if ctx.callback_errors:
            raise CheckFailure(f"a host function raised: {ctx.callback_errors[0]}")
        status, detail = Status.PASS, note or ""
    except Skip as skip:
        status, detail = Status.SKIP, str(skip)
    except (CheckFailure, DriverError) as failure:
        status, detail = Status.FAIL, str(failure)
    except Exception as error:
        status, detail = Status.FAIL, f"{type(error).__name__}: {error}"
    if ctx is not None:
        try:
            ctx.close()
        except DriverError as error:
            if status is not Status.FAIL:
                status, detail = Status.FAIL, f"after the check: {error}"
    return CheckResult(check.name, status, detail, time.monotonic() - started)


def child_main() -> None:
    """The child: ``LIBRARY NAME OPTIONS CHECK...`` on the command line, JSON lines out."""
    library, name, options, *names = sys.argv[1:]
    # The protocol keeps the real stdout; whatever the driver prints goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def send(**message: object) -> None:
        protocol.write(json.dumps(message) + "\n")

    try:
        driver = load(library)
    except DriverLoadError as error:
        send(event="load_error", message=str(error))
        return
    for check in names:
        send(event="start", check=check)
        send(event="result", **asdict(run_check(driver, CHECKS[check], name, options or None)))


def run_conformance(
    library: str | os.PathLike[str],
    name: str = DEFAULT_NAME,
    *,
    options: str | None = None,
    checks: Sequence[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Runs the conformance checks (all, or those named in ``checks``) against the driver
    library at ``library`` for the backend ``name``; ``options`` go to client_create.

    Each result is also passed to ``on_result`` as it arrives. A check that crashes the
    process or runs longer than ``timeout`` seconds fails. Raises DriverLoadError when the
    library is not a usable driver, ValueError for an unknown check name.
    """
    pending = list(CHECKS if checks is None else checks)
    for check in pending:
        if check not in CHECKS:
            raise ValueError(f"no check named {check!r}; the checks are {', '.join(CHECKS)}")
    results: list[CheckResult] = []

    def report(result: CheckResult) -> None:
        results.append(result)
        pending.remove(result.name)
        if on_result is not None:
            on_result(result)

    while pending:
        ending = _run_child(os.fspath(library), name, options, list(pending), timeout, report)
        if ending is not None:
            # Outside any check: reported under a name of its own.
            results.append(CheckResult("process", Status.FAIL, ending, 0.0))
            if on_result is not None:
                on_result(results[-1])
    return results


def _run_child(
    library: str,
    name: str,
    options: str | None,
    checks: list[str],
    timeout: float,
    report: Callable[[CheckResult], None],
) -> str | None:
    """One child running ``checks`` until it ends; reports what it finished, and a failure
    for the check it died or hung in. Returns how it ended when it died outside a check."""
    environment = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    environment["PYTHONPATH"] = os.pathsep.join(
        [package_root, *filter(None, [environment.get("PYTHONPATH")])]
    )
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-P", "-c", _CHILD, library, name, options or "", *checks],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment,
            text=True,
        )
        assert process.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
        current: str | None = None
        finished = 0
        started = time.monotonic()
        while True:
            try:
                line = lines.get(timeout=max(0.0, started + timeout - time.monotonic()))
            except queue.Empty:
                process.kill()
                process.wait()
                if current is None and finished == 0:
                    raise DriverLoadError(f"loading {library} took over {timeout:.0f} s") from None
                if current is None:
                    return f"the process that ran {', '.join(checks[:finished])} hung after them"
                report(
                    CheckResult(current, Status.FAIL, f"timed out after {timeout:.0f} s", timeout)
                )
                return None
            if line is None:
                break
            message = json.loads(line)
            if message["event"] == "load_error":
                process.wait()
                raise DriverLoadError(message["message"])
            if message["event"] == "start":
                current, started = message["check"], time.monotonic()
            else:
                del message["event"]
                report(CheckResult(**{**message, "status": Status(message["status"])}))
                current, finished = None, finished + 1
        returncode = process.wait()
        stderr.seek(0)
        output = stderr.read()[-2000:].strip()
    ending = _describe(returncode) + (f"; its stderr ends with:\n{output}" if output else "")
    if current is not None:
        report(
            CheckResult(
                current, Status.FAIL, f"the process running it {ending}", time.monotonic() - started
            )
        )
        return None
    if returncode == 0:
        return None
    if finished == 0:
        raise DriverLoadError(f"the process checking {library} {ending} before running a check")
    # Not within a check: at exit (a driver's destructors) or in a driver thread between checks.
    return f"the process that ran {', '.join(checks[:finished])} {ending} after them"


def _describe(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)
