"""The remote driver: device memory in a device process (torchplug-device) the driver
starts, reached only through its copies. What sets it apart from the simulator: the memory
really is elsewhere, the device process's end is reported instead of crashing the user's
process, a forked child is refused clearly, and the device process ends with its user.
(The operator-level checks run on it in test_discrete_device.py; the interface's conformance
in torchplug-testing's test_driver_conformance.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

ENVIRONMENT = {
    **os.environ,
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
    "TORCHPLUG_PRIVATEUSE1": "dsc",
}

PRELUDE = textwrap.dedent(
    """
    import os, signal, sys, torch
    from torchplug import Backend, get_remote_driver
    status = Backend(name="dsc", driver=get_remote_driver(), driver_options="devices=2").autoload()
    assert status.active, status.reason

    def device_processes():
        found = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/stat") as stat_file:
                    stat = stat_file.read()
                with open(f"/proc/{entry}/cmdline", "rb") as command_file:
                    program = command_file.read().split(bytes(1))[0]
            except OSError:
                continue
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            if program.endswith(b"/torchplug-device") and parent == os.getpid():
                found.append(int(entry))
        return found
    """
)


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script)],
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _lines(completed: subprocess.CompletedProcess[str]) -> list[str]:
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout.splitlines()


def test_device_memory_lives_in_the_device_process() -> None:
    lines = _lines(
        _run(
            """
            x = torch.arange(1 << 16, dtype=torch.float32, device="dsc")
            [pid] = device_processes()
            address = x.data_ptr()
            def mapped(maps_path):
                with open(maps_path) as maps:
                    for line in maps:
                        low, high = (int(part, 16) for part in line.split()[0].split("-"))
                        if low <= address < high:
                            return True
                return False
            print(mapped(f"/proc/{pid}/maps"))
            print(torch.device("dsc", 1).index, torch.dsc.device_count())
            y = (x * 2).to("dsc:1")
            print(float(y.sum().cpu()) == float((torch.arange(1 << 16) * 2.0).sum()))
            """
        )
    )
    assert lines == ["True", "1 2", "True"]


def test_the_device_process_dying_fails_calls_clearly() -> None:
    lines = _lines(
        _run(
            """
            x = torch.ones(8, device="dsc")
            [pid] = device_processes()
            os.kill(pid, signal.SIGKILL)
            try:
                (x + 1).cpu()
            except RuntimeError as error:
                print(str(error).replace("\\n", " "))
            print("the process goes on")
            """
        )
    )
    assert "device process" in lines[0], lines
    assert "was killed by signal 9" in lines[0], lines
    assert lines[-1] == "the process goes on"


def test_a_forked_child_is_refused_and_the_parent_keeps_its_device() -> None:
    lines = _lines(
        _run(
            """
            x = torch.ones(4, device="dsc")
            child = os.fork()
            if child == 0:
                try:
                    torch.ones(2, device="dsc").cpu()
                    os._exit(3)
                except RuntimeError as error:
                    print("child:", str(error).replace("\\n", " "), flush=True)
                    os._exit(0)
            _, status = os.waitpid(child, 0)
            print("child exit", os.waitstatus_to_exitcode(status))
            print("parent", (x * 3).sum().item())
            """
        )
    )
    assert lines[0].startswith("child:"), lines
    assert "fork" in lines[0], lines
    assert lines[1:] == ["child exit 0", "parent 12.0"]


def test_the_device_process_ends_with_its_user() -> None:
    [line] = _lines(
        _run(
            """
            torch.ones(1, device="dsc")
            print(*device_processes())
            """
        )
    )
    pid = int(line)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(") ")[1].startswith("Z"):
                    break  # exited, not yet reaped by its (gone) parent's reaper
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the device process {pid} outlived the process that used it")
