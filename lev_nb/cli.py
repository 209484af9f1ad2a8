"""The ``lev`` command line tool."""

from __future__ import annotations

import argparse
import sys

from lev_nb import __version__


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for every ``lev`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="lev",
        description="Design, check and run multi-stage LLM agents (lev_nb).",
    )
    parser.add_argument("--version", action="version", version=f"lev {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lev`` console script; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
