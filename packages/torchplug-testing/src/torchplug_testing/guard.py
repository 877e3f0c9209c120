"""The crash guard: OpInfo operators and ModuleInfo modules run in a child process that is
restarted when it dies.

A kernel that segfaults, aborts or hangs must become one failed test naming
the operator, the dtype, the device and the signal, not the end of the run.
So the sweep tests hand each operator to a long-lived worker process and
read back one outcome per sample; when the worker dies (or stops making
progress for ``--op-timeout`` seconds) the test that was running fails with
the cause, and the next test starts a fresh worker.

The worker is the same pytest invocation as its parent (same arguments,
working directory and environment) in a serving mode: it loads the same
backend, conftest files and ``-p`` plugins, so kernels registered by any of
them apply in the worker too, then serves requests from
``sessionstart`` instead of collecting tests, and exits without writing
reports.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Protocol

import pytest

from torchplug_testing import device_api, fallback, moduleinfo, opinfo, out_device

log = logging.getLogger(__name__)

WORKER_OPTION = "--opinfo-worker"
DEFAULT_OP_TIMEOUT_S = 120.0
# Importing torch, the backend and PyTorch's OpInfo database on a loaded machine.
STARTUP_TIMEOUT_S = 600.0
# Lines of the worker's output (faulthandler's traceback) quoted in a crash report.
CRASH_CONTEXT_LINES = 12
# Workers that failed to start in a row before the guard gives up for the run
# (one failure may be transient: a backend being rebuilt under the run).
MAX_FAILED_STARTS = 2


class OpinfoRunner(Protocol):
    """Runs one operator's sweep in one mode and dtype (a module's: mode ``module_forward``...)."""

    def run(self, mode: str, op: Any, dtype: Any, limit: int | None) -> opinfo.SweepResult: ...

    def close(self) -> None: ...


class InProcessRunner:
    """No guard (``--no-crash-guard``): for debuggers; a crashing kernel ends the run."""

    def __init__(self, device: str) -> None:
        self.device = device

    def run(self, mode: str, op: Any, dtype: Any, limit: int | None) -> opinfo.SweepResult:
        if mode.startswith(moduleinfo.REQUEST_PREFIX):
            module_mode = mode.removeprefix(moduleinfo.REQUEST_PREFIX)
            return moduleinfo.sweep(module_mode, op, self.device, dtype, limit)
        return opinfo.collect(operator_outcomes(mode, op, self.device, dtype, limit))

    def close(self) -> None:
        pass


class WorkerStartError(RuntimeError):
    """The worker process could not be started; every guarded test fails with this."""


class CrashGuard:
    """Runs sweeps in a worker process, restarted after it dies."""

    def __init__(self, command: list[str], cwd: str, op_timeout: float) -> None:
        self.command = command
        self.cwd = cwd
        self.op_timeout = op_timeout
        self.logs = Path(tempfile.mkdtemp(prefix="torchplug-crash-guard-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.failed_starts = 0
        self.start_error: str | None = None
        self._requests: Any = None
        self._replies: int = -1
        self._buffer = b""
        self._log_path: Path | None = None

    @classmethod
    def for_pytest(cls, config: pytest.Config, op_timeout: float) -> CrashGuard:
        """A guard whose worker repeats this pytest process's own invocation."""
        command = [sys.executable, "-m", "pytest", *map(str, config.invocation_params.args)]
        # No capturing (a crash's traceback goes straight to the worker's log) and
        # no xdist in the worker itself: options given last win (-n 0 over -n auto).
        command += ["--capture=no", "-p", "no:cacheprovider"]
        if config.pluginmanager.hasplugin("xdist"):
            command += ["-n", "0"]
        return cls(command, str(config.invocation_params.dir), op_timeout)

    def run(self, mode: str, op: Any, dtype: Any, limit: int | None) -> opinfo.SweepResult:
        if self.start_error is not None:
            raise WorkerStartError(self.start_error)
        if self.process is None:
            self._start()
        request = {
            "mode": mode,
            "op": sweep_id(mode, op),
            "dtype": str(dtype).removeprefix("torch."),
            "limit": limit,
        }
        log_offset = self._log_path.stat().st_size if self._log_path else 0
        result = opinfo.SweepResult()
        try:
            self._send(request)
            while True:
                message = self._receive(self.op_timeout)
                if "sample" in message:
                    result.add(opinfo.SampleOutcome(**message["sample"]))
                elif "skip" in message:
                    result.skip_reason = message["skip"]
                    return result
                elif "error" in message:
                    raise RuntimeError(f"the crash guard's worker failed: {message['error']}")
                else:
                    return result
        except _WorkerGone as gone:
            result.record_crash(gone.how, self._crash_context(log_offset))
            return result

    def close(self) -> None:
        if self.process is not None:
            try:
                self._send({"exit": True})
                fallback.add_guard_worker_report(self._receive(30).get("fallback"))
                self.process.wait(timeout=30)
            except (_WorkerGone, OSError, subprocess.TimeoutExpired):
                self._kill()
            self._discard()
        for path in self.logs.iterdir():
            path.unlink()
        self.logs.rmdir()

    # The worker process ---------------------------------------------------------------------

    def _start(self) -> None:
        to_worker_read, to_worker_write = os.pipe()
        from_worker_read, from_worker_write = os.pipe()
        self.starts += 1
        self._log_path = self.logs / f"worker-{self.starts}.log"
        log.info("starting crash-guard worker #%d: %s", self.starts, " ".join(self.command))
        with self._log_path.open("wb") as output:
            self.process = subprocess.Popen(
                [*self.command, WORKER_OPTION, f"{to_worker_read},{from_worker_write}"],
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=(to_worker_read, from_worker_write),
            )
        os.close(to_worker_read)
        os.close(from_worker_write)
        self._requests = os.fdopen(to_worker_write, "wb", buffering=0)
        self._replies = from_worker_read
        self._buffer = b""
        try:
            self._receive(STARTUP_TIMEOUT_S)
        except _WorkerGone as gone:
            self.failed_starts += 1
            tail = self._log_path.read_text(errors="replace").strip().splitlines()[-25:]
            error = (
                f"the crash guard could not start its worker process ({gone.how}); "
                f"command: {' '.join(self.command)}\n" + "\n".join(tail)
            )
            if self.failed_starts >= MAX_FAILED_STARTS:
                self.start_error = error
            raise WorkerStartError(error) from None
        self.failed_starts = 0

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._requests.write((json.dumps(message) + "\n").encode())
        except BrokenPipeError:
            raise self._gone() from None

    def _receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([self._replies], [], [], max(remaining, 0))
            if not readable:
                self._kill()
                self._discard()
                raise _WorkerGone(f"no progress for {timeout:.0f} s (hung; the worker was killed)")
            chunk = os.read(self._replies, 65536)
            if not chunk:
                raise self._gone()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _gone(self) -> _WorkerGone:
        assert self.process is not None
        try:
            status = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._kill()
            status = self.process.returncode
        self._discard()
        if status < 0:
            return _WorkerGone(f"killed by {signal.Signals(-status).name}")
        return _WorkerGone(f"the process exited with status {status}")

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _discard(self) -> None:
        self.process = None
        if self._requests is not None:
            self._requests.close()
            self._requests = None
        if self._replies >= 0:
            os.close(self._replies)
            self._replies = -1

    def _crash_context(self, offset: int) -> str:
        """The worker's last words (faulthandler's traceback) since the request began."""
        if self._log_path is None or not self._log_path.is_file():
            return ""
        with self._log_path.open("rb") as output:
            output.seek(offset)
            text = output.read().decode(errors="replace")
        lines = [line for line in text.splitlines() if line.strip()]
        start = next(
            (i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), None
        )
        if start is None:
            return ""
        # The frames below the worker's own request loop say nothing about the operator.
        end = next(
            (i for i in range(start, len(lines)) if __file__ in lines[i]),
            start + CRASH_CONTEXT_LINES,
        )
        return "\n".join(lines[start : min(end, start + CRASH_CONTEXT_LINES)])


def sweep_id(mode: str, op: Any) -> str:
    """The name the worker finds an operator (or a module) by."""
    if mode.startswith(moduleinfo.REQUEST_PREFIX):
        return moduleinfo.module_id(op)
    return opinfo.op_id(op)


def sample_outcomes(
    operators: dict[str, Any], request: dict[str, Any], device: str, dtype: Any
) -> Any:
    """The outcomes of one request: an operator's sweep, or a module's."""
    mode, name, limit = request["mode"], request["op"], request["limit"]
    if mode.startswith(moduleinfo.REQUEST_PREFIX):
        module_mode = mode.removeprefix(moduleinfo.REQUEST_PREFIX)
        return moduleinfo.sample_outcomes(
            module_mode, moduleinfo.by_id()[name], device, dtype, limit
        )
    return operator_outcomes(mode, operators[name], device, dtype, limit)


def operator_outcomes(mode: str, op: Any, device: str, dtype: Any, limit: int | None) -> Any:
    """An operator's outcomes in ``mode``: its out= refusals, or its values against the CPU's."""
    if mode == out_device.MODE:
        return out_device.sample_outcomes(op, device, dtype, limit)
    return opinfo.sample_outcomes(mode, op, device, dtype, limit)


class _WorkerGone(Exception):
    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


# The worker side --------------------------------------------------------------------------


class Worker:
    """pytest plugin of the worker process: serves sweep requests, then exits."""

    def __init__(self, device: str, channel: str) -> None:
        self.device = device
        self.requests, self.replies = (int(fd) for fd in channel.split(","))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Ctrl-C is the parent's to handle; it ends this process by closing the pipe.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        failed: list[BaseException] = []

        def target() -> None:
            try:
                serve(self.device, self.requests, self.replies)
            except BaseException as error:
                failed.append(error)
                raise

        # In a thread of its own: OpInfo's sample generators walk the caller's
        # stack (inspect.stack, looking for a unittest test), which costs ~40 ms
        # per operator under pytest's deep stack and next to nothing in a thread's.
        thread = threading.Thread(target=target, name="torchplug-opinfo-worker")
        thread.start()
        thread.join()
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip collection, the run and every report writer (junitxml, the
        # conformance report): the parent process owns those.
        os._exit(1 if failed else 0)


def serve(device: str, requests_fd: int, replies_fd: int) -> None:
    import torch

    faulthandler.enable(all_threads=True)
    operators = {opinfo.op_id(op): op for op in opinfo.op_db()}
    replies = os.fdopen(replies_fd, "wb", buffering=0)

    def reply(message: dict[str, Any]) -> None:
        replies.write((json.dumps(message) + "\n").encode())

    reply({"ready": True})
    with os.fdopen(requests_fd, "rb") as requests:
        for line in requests:
            request = json.loads(line)
            if request.get("exit"):
                reply({"fallback": fallback.collect(device)})
                return
            try:
                dtype = getattr(torch, request["dtype"])
                for outcome in sample_outcomes(operators, request, device, dtype):
                    reply({"sample": vars(outcome)})
                # No operator leaves queued work behind for the next one.
                device_api.synchronize(device)
            except unittest.SkipTest as skip:
                reply({"skip": str(skip)})
                continue
            except Exception as error:
                reply({"error": opinfo.describe(error)})
                continue
            reply({"done": True})
