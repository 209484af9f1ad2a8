"""The ``lev`` command line tool: the parser assembly and the entry point ``main``.

Every command and all terminal text live in this package: ``blueprint_commands`` (validate, schema,
graph), ``run_commands`` (run, resume, ps, result), ``interaction_commands`` (msg, respond, and the
prompt of ``lev run`` at a terminal), ``config_commands`` (config, and the global
``-c KEY=VALUE`` launch option), ``progress`` (the live line ``lev run`` prints on stderr) and
``run_status`` (how a recorded run is described; ``%lev ps`` and the notebook's run display use it
too) and ``inspect_commands`` (show, log, context, stages, cancel, kill: looking at a recorded run
and stopping one from outside). The console script ``lev`` is ``lev_nb.cli:main``; ``python -m lev_nb.cli``
runs the same.
"""

# No `from __future__ import annotations`: importing __future__ is a measurable part of `lev --help`;
# names known only to type checkers are quoted instead.

import sys

# The C module under `signal`: the same calls without the enum wrappers, whose import (enum,
# functools, collections) would cost `lev --help` more than the rest of it together.
import _signal as signal  # type: ignore[import-not-found]

TYPE_CHECKING = False  # typing itself is not imported: `lev --help` stays quick
if TYPE_CHECKING:
    from typing import Any


def build_parser() -> "Any":
    """Build the argument parser for every ``lev`` subcommand (lev_nb.cli.app)."""
    from lev_nb.cli.app import build_parser as build

    return build()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lev`` console script; returns the process exit status.

    A Ctrl-C stops the command with exit status 130 and one line, never a traceback: only the
    first one interrupts (a second one while the first unwinds is ignored), and ``lev run`` takes
    over while a run exists, cancelling it so that its record says so.
    """
    interrupted = False

    def first_only(signum: int, frame: "Any") -> None:
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
        args = sys.argv[1:] if argv is None else list(argv)
        if args in ([], ["-h"], ["--help"]):  # the overview needs no command module (lev_nb.cli.overview)
            from lev_nb.cli.overview import print_overview

            print_overview()
            return 0
        if args == ["--version"]:  # what argparse's version action prints, without the parser
            from lev_nb.version import __version__

            print(f"lev {__version__}")
            return 0
        if argv is None:  # a process of its own, not a caller's (tests, the notebook's %lev)
            from lev_nb.own_process import tune_collector

            tune_collector()
        from lev_nb.cli.app import run

        return run(args)
    except KeyboardInterrupt:
        print("lev: interrupted", file=sys.stderr)
        return 130
    finally:
        # After a Ctrl-C the process is on its way out: leave later ones ignored until it is.
        if previous is not None and not interrupted and signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)


