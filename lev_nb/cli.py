"""The ``lev`` command line tool."""

from __future__ import annotations

import argparse
import os
import sys

from lev_nb import __version__


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for every ``lev`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="lev",
        description="Design, check and run multi-stage LLM agents (lev_nb).",
    )
    parser.add_argument("--version", action="version", version=f"lev {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_blueprint_commands(subparsers)
    _add_run_commands(subparsers)
    return parser


def _add_blueprint_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``lev validate`` and ``lev schema`` (owned by lev_nb.blueprint)."""
    from lev_nb.blueprint.commands import add_commands

    add_commands(subparsers)


def _add_run_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``lev run``, ``lev ps``, ``lev result`` and ``lev graph`` (owned by lev_nb.engine)."""
    from lev_nb.engine.commands import add_commands

    add_commands(subparsers)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lev`` console script; returns the process exit status."""
    parser = build_parser()
    # `lev run` takes the blueprint's caller inputs as free-form --<input> options.
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    if args.command is None:
        parser.print_help()
        return 0
    func = getattr(args, "func", None)
    if func is None:
        return 0
    try:
        return int(func(args))
    except BrokenPipeError:
        # The reader went away (`lev ps | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
