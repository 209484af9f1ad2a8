"""``-v/--verbose`` on every ``lev`` command (upstream ``cli.md``: "global and works on every
subcommand"): the one declaration of the flag, what it adds to each command, and the debug log.

The flag is accepted before the command (``lev -v ps``) and after it (``lev ps -v``). Every command
then also logs lev_nb's debug messages on stderr; what else it adds is the command's own business
(it reads ``args.verbose``) and is listed in :data:`ADDS`, which the ``--help`` of each command
prints, so a user can see that the flag does something there.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ADDS", "add_verbose", "add_everywhere", "is_verbose", "debug_log"]

_LOG = "also log lev_nb's debug messages on stderr"

# What -v adds per command (the debug log comes with every one of them).
ADDS: dict[str, str] = {
    "run": "tell every event on stderr as it happens, one sentence a line, as `lev log` tells them",
    "resume": "tell every event on stderr as it happens, one sentence a line, as `lev log` tells them",
    "validate": "also say which file was checked, and the configuration it was linted under",
    "ps": "also show each run's model, start time and workdir",
    "show": "also tell every recorded event, one sentence a line, after the story",
    "context": "also print each region's contents (as --full)",
    "stages": "also list each stage's regions (as --regions)",
    "doctor": "run every check even after one fails, and show each check's time",
    "config": "also list every environment variable that sets a key: set here or not, and whether it wins",
}


def add_verbose(parser: argparse.ArgumentParser, command: str) -> None:
    """Declare ``-v/--verbose`` on one command's parser, with what it adds there as its help.

    The default is left unset, so that ``lev -v COMMAND`` (set by the top-level parser) is not
    reset by the command's own parser; :func:`is_verbose` reads either."""
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help=ADDS.get(command, _LOG))


def add_everywhere(parser: argparse.ArgumentParser) -> None:
    """``-v/--verbose`` on ``parser`` and on every command and sub-command below it that does not
    declare it already."""
    if not any("--verbose" in action.option_strings for action in parser._actions):
        from lev_nb.cli.overview import VERBOSE_HELP

        parser.add_argument("-v", "--verbose", action="store_true", default=False, help=VERBOSE_HELP)
    _below(parser)


def _below(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if not any("--verbose" in a.option_strings for a in sub._actions):
                    add_verbose(sub, name)
                _below(sub)


def is_verbose(args: argparse.Namespace) -> bool:
    """Whether ``-v`` was given, before or after the command."""
    return bool(getattr(args, "verbose", False))


@contextmanager
def debug_log(on: bool) -> Iterator[None]:
    """While the command runs, with ``on``: lev_nb's log records, debug ones included, on stderr
    (what ``-v`` adds to every command)."""
    if not on:
        yield
        return
    import logging  # here: most commands run without -v, and logging is a slow import

    class _Stderr(logging.Handler):
        """Writes to whatever ``sys.stderr`` is when a record comes (a test may have replaced it)."""

        def emit(self, record: logging.LogRecord) -> None:
            try:
                print(self.format(record), file=sys.stderr)
            except Exception:  # a log line must never break the command
                self.handleError(record)

    handler = _Stderr()
    handler.setFormatter(logging.Formatter("lev: debug: %(name)s: %(message)s"))
    logger = logging.getLogger("lev_nb")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
