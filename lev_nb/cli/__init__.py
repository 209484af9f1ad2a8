"""The ``lev`` command line tool: the parser assembly and the entry point ``main``.

Every command and all terminal text live in this package: ``blueprint_commands`` (validate, schema,
graph), ``run_commands`` (run, ps, result), ``config_commands`` (config, and the global
``-c KEY=VALUE`` launch option), ``progress`` (the live line ``lev run`` prints on stderr) and
``run_status`` (how a recorded run is described; ``%lev ps`` and the notebook's run display use it
too). The console script ``lev`` is ``lev_nb.cli:main``; ``python -m lev_nb.cli``
runs the same.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from lev_nb.version import __version__
from lev_nb.cli import blueprint_commands, config_commands, run_commands

# The subcommands in the order ``lev --help`` lists them.
COMMANDS = (
    blueprint_commands.add_validate,
    blueprint_commands.add_schema,
    run_commands.add_run,
    run_commands.add_ps,
    run_commands.add_result,
    blueprint_commands.add_graph,
    config_commands.add_config,
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for every ``lev`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="lev",
        description="Design, check and run multi-stage LLM agents (lev_nb).",
    )
    parser.add_argument("--version", action="version", version=f"lev {__version__}")
    config_commands.add_launch_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lev`` console script; returns the process exit status.

    A Ctrl-C stops the command with exit status 130 and one line, never a traceback: only the
    first one interrupts (a second one while the first unwinds is ignored), and ``lev run`` takes
    over while a run exists, cancelling it so that its record says so.
    """
    interrupted = False

    def first_only(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            # Ignored from now on, by the kernel: a Python handler would be reset to the default
            # while the interpreter shuts down, and a late Ctrl-C would then kill the process.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, first_only)
    except ValueError:  # not the main thread: no signal arrives here
        previous = None
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:
        print("lev: interrupted", file=sys.stderr)
        return 130
    finally:
        # After a Ctrl-C the process is on its way out: leave later ones ignored until it is.
        if previous is not None and not interrupted and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)


def _main(argv: list[str]) -> int:
    parser = build_parser()
    # `lev run` takes the blueprint's caller inputs as free-form --<input> options: set them aside
    # before argparse, which then refuses anything else it does not know.
    argv, extra = run_commands.split_run_argv(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown(parser, args, unknown)
    args.extra = extra
    if args.command is None:
        parser.print_help()
        return 0
    func = getattr(args, "func", None)
    if func is None:
        return 0
    try:
        if not args.settings:
            return int(func(args))
        from lev_nb.settings import ConfigError, launch_options

        try:
            overrides = config_commands.launch_overrides(args.settings)
        except ConfigError as exc:
            print(f"lev: error: {exc}", file=sys.stderr)
            return 2
        with launch_options(overrides):
            return int(func(args))
    except BrokenPipeError:
        # The reader went away (`lev ps | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> None:
    """argparse's "unrecognized arguments" usage error (exit 2), from the command's own parser and
    with a "did you mean" when an option of that command is close."""
    from lev_nb.blueprint.errors import did_you_mean

    command = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args.command in action.choices:
            command = action.choices[args.command]
    options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    message = f"unrecognized arguments: {' '.join(unknown)}"
    first = next((u.partition("=")[0] for u in unknown if u.startswith("--")), None)
    hint = did_you_mean(first, options) if first else None
    command.error(message + (f" ({hint.replace(chr(39), '')})" if hint else ""))
