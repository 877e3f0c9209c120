"""The ``torchplug`` command."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from importlib import metadata

log = logging.getLogger("torchplug")

# Packages add subcommands here: the entry point's name is the subcommand, its
# value a callable register(subparsers) that adds the subcommand's parser and
# sets its ``handler`` default (a function of the parsed arguments, returning
# the exit status). ``args.pytest_args`` holds what followed ``--``.
COMMANDS_GROUP = "torchplug.commands"
# Subcommands of optional packages: what they need and the distribution
# providing it, for the message when that is not installed.
OPTIONAL_COMMANDS = {
    "check": ("the conformance suite", "torchplug-testing"),
    "bench": ("the benchmark suite", "torchplug-bench"),
}


def _doctor(args: argparse.Namespace) -> int:
    from torchplug import doctor

    sys.stdout.write(doctor.run(as_json=args.json) + "\n")
    return 0


def _unavailable(message: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        raise SystemExit(message)

    return handler


def _add_installed_commands(commands: argparse._SubParsersAction) -> None:
    """Subcommands of installed packages, from the ``torchplug.commands`` entry points.

    A command whose package is missing or fails to load still parses (any
    arguments) and then says what to install or what went wrong, rather than
    argparse's "invalid choice".
    """
    failures: dict[str, str] = {}
    for entry_point in metadata.entry_points(group=COMMANDS_GROUP):
        try:
            entry_point.load()(commands)
        except Exception as error:
            log.debug("torchplug command %s failed to load", entry_point.name, exc_info=True)
            failures[entry_point.name] = (
                f"{entry_point.value} raised {type(error).__name__}: {error}"
            )
    for name, (what, distribution) in OPTIONAL_COMMANDS.items():
        if name in commands.choices:
            continue
        cause = f" ({failures.pop(name)})" if name in failures else ""
        _add_stand_in(
            commands,
            name,
            f"torchplug {name} needs {what}, which is not installed: "
            f"pip install {distribution}{cause}",
        )
    for name, cause in failures.items():
        if name not in commands.choices:  # a clash with another command's name is not replaced
            _add_stand_in(commands, name, f"torchplug {name} is unavailable: {cause}")


def _add_stand_in(commands: argparse._SubParsersAction, name: str, message: str) -> None:
    stand_in = commands.add_parser(name, help=f"(unavailable) {message}", add_help=False)
    # Any arguments, options first included (which argparse.REMAINDER refuses).
    stand_in.set_defaults(handler=_unavailable(message), takes_any_arguments=True)


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
    _add_installed_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # `torchplug check foo -- -k autograd`: what follows -- is for pytest.
    split = argv.index("--") if "--" in argv else len(argv)
    parser = build_parser()
    args, unrecognized = parser.parse_known_args(argv[:split])
    if unrecognized and not getattr(args, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unrecognized)}")
    args.pytest_args = argv[split + 1 :]
    if args.pytest_args and args.command != "check":
        parser.error(f"arguments after -- are only for `torchplug check`, not `{args.command}`")
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
