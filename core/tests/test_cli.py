"""The `torchplug` command: doctor's output, and the subcommands of optional packages."""

import json
import subprocess
import sys

from torchplug import torch_builds


def python(*args: str) -> subprocess.CompletedProcess[str]:
    """This interpreter run with ``args`` in a child process, its output captured."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, check=False
    )


def torchplug(*args: str) -> str:
    result = python("-m", "torchplug.cli", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_doctor_table_lists_foo() -> None:
    out = torchplug("doctor")
    assert "ENTRY POINT" in out
    assert "torch_foo" in out
    assert "active" in out
    assert "current accelerator: foo" in out
    assert f"(native builds for torch {', '.join(torch_builds.installed_builds())})" in out
    assert "TORCHPLUG_DISABLE" in out


def test_doctor_json_is_stable() -> None:
    report = json.loads(torchplug("doctor", "--json"))
    assert set(report) == {
        "torch_version",
        "torchplug_version",
        "settings",
        "privateuse1_owner",
        "current_accelerator",
        "core_builds",
        "core_build_for_running_torch",
        "backends",
        "cuda",
    }
    assert report["core_builds"] == list(torch_builds.installed_builds())
    assert report["core_build_for_running_torch"] is True
    foo = next(b for b in report["backends"] if b["entry_point"] == "torch_foo")
    assert foo["distribution"] == "torch_foo"
    assert foo["status"] == "active"
    assert foo["device"] == "foo"
    assert foo["device_count"] == 2
    assert foo["load_ms"] > 0
    assert report["privateuse1_owner"] == "foo"


def test_check_without_the_suite_says_what_to_install() -> None:
    hide_suite = (
        "import sys; sys.modules['torchplug_testing'] = None; "
        "from torchplug.cli import main; raise SystemExit(main(['check', 'foo']))"
    )
    result = python("-c", hide_suite)
    assert result.returncode != 0
    assert "pip install torchplug-testing" in result.stderr


def test_pytest_arguments_are_only_for_check() -> None:
    result = python("-m", "torchplug.cli", "doctor", "--", "-k", "x")
    assert result.returncode == 2
    assert "only for `torchplug check`" in result.stderr
