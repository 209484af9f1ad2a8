"""Looking at a recorded run, and stopping one another process runs: ``lev show``, ``lev log``,
``lev context``, ``lev stages``, ``lev cancel`` and ``lev kill``.

Each takes a run id or a unique prefix of one (as ``lev result`` does) and reads the run's folder,
so it works on a run that finished last week and on one live in another process. What they say
is :mod:`lev_nb.explain`'s; this module owns the command lines, the messages and the exit
statuses (0 done, 1 a run that cannot be found, read or stopped as asked).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from lev_nb.cli.dispatch import fail
from lev_nb.cli.verbosity import is_verbose

SHOW_EPILOG = """\
examples:
  lev show RUN_ID           the stages it went through, what each cost, warnings, denials, the answer
  lev log RUN_ID --follow   its events as they happen, until it ends
  lev context RUN_ID        what the model saw at its last request, region by region
  lev stages RUN_ID         tokens and cost per stage
"""

CANCEL_EPILOG = """\
The run ends cancelled and its record says who cancelled it. A live run in another process stops
within about a second (its process reads the request); a paused run, or one whose process is
gone, is closed here. `lev kill RUN_ID` stops the process instead.
"""

KILL_EPILOG = """\
kill signals the process that runs RUN_ID (SIGTERM; SIGKILL with --force). That stops every run
the process hosts (a notebook kernel's too); their records stay as they stood, so `lev resume`
continues them. To stop only this run, with its record saying so: `lev cancel RUN_ID`.
"""


def _add(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, helptext: str,
         description: str, epilog: str = "") -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=helptext, description=description, epilog=epilog or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_id", help="a run id (or a unique prefix of one)")
    return parser


def add_show(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev show``."""
    show = _add(subparsers, "show", "tell a run's story: stages, cost, warnings, the answer",
                "Tell a recorded run's story as the notebook does: the stages it went through with their "
                "time, calls, tokens and cost, what happened in each, its warnings, the tool calls that "
                "were denied, the answers that were rejected, the answer and the runs it started.",
                SHOW_EPILOG)
    show.set_defaults(func=cmd_show)


def add_log(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev log``."""
    log = _add(subparsers, "log", "print a run's events as sentences (--follow: as they happen)",
               "Print a run's events (events.jsonl) one sentence a line: time (UTC), stage, what happened.")
    log.add_argument("-f", "--follow", action="store_true",
                     help="keep printing events as the run writes them, until it ends (works on a run in "
                          "another process)")
    log.add_argument("--json", action="store_true", help="print the events as written: one JSON object a line")
    log.set_defaults(func=cmd_log)


def add_context(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev context``."""
    context = _add(subparsers, "context", "show what the model saw at a run's last request",
                   "Show what the model saw at a run's last request: each region with its kind, entries and "
                   "tokens (--full: what each one held), from the run's transcript.jsonl.")
    context.add_argument("--full", action="store_true", help="also print each region's contents")
    context.add_argument("--json", action="store_true", help="print the request as JSON")
    context.set_defaults(func=cmd_context)


def add_stages(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev stages``."""
    stages = _add(subparsers, "stages", "print a run's per-stage token ledger",
                  "Print a run's per-stage token ledger: prompt, output, cache read and write tokens, calls "
                  "and cost of each stage (sub-agents and workers count in the stage that started them).")
    stages.add_argument("--regions", action="store_true",
                        help="also show each stage's per-region token high-water mark, largest first")
    stages.add_argument("--json", action="store_true", help="print the ledger as JSON")
    stages.set_defaults(func=cmd_stages)


def add_cancel(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev cancel``."""
    cancel = _add(subparsers, "cancel", "cancel a run (its record says cancelled)",
                  "Cancel a run another process runs, or close one nobody runs any more.", CANCEL_EPILOG)
    cancel.set_defaults(func=cmd_cancel)


def add_kill(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev kill``."""
    kill = _add(subparsers, "kill", "stop the process that runs a run (SIGTERM; --force: SIGKILL)",
                "Signal the process that runs a run.", KILL_EPILOG)
    kill.add_argument("--force", action="store_true", help="send SIGKILL, which cannot be caught or ignored")
    kill.set_defaults(func=cmd_kill)


def _open(command: str, run_id: str) -> Any:
    """The run's record, or the exit status after saying why there is none."""
    from lev_nb.explain.record import RecordUnreadable, open_run

    try:
        return open_run(run_id)
    except RecordUnreadable as exc:
        return fail(command, str(exc))


def cmd_show(args: argparse.Namespace) -> int:
    """``lev show RUN_ID``."""
    from lev_nb.cli.run_status import status_text
    from lev_nb.explain.show import story_of, story_text

    record = _open("show", args.run_id)
    if isinstance(record, int):
        return record
    sys.stdout.write(story_text(story_of(record), status_text(record.meta)))
    if is_verbose(args):  # every recorded event as `lev log` tells it
        from lev_nb.explain.log import log_line

        print("\nEvents:")
        for data in record.raw_events():
            text = log_line(data)
            if text is not None:
                print(f"  {text}")
    return 0


def cmd_log(args: argparse.Namespace) -> int:
    """``lev log RUN_ID [--follow] [--json]``."""
    from lev_nb.explain.log import log_line
    from lev_nb.explain.record import events_path, follow_lines

    record = _open("log", args.run_id)
    if isinstance(record, int):
        return record
    lines = follow_lines(events_path(record), record.finished) if args.follow else iter(record.raw_events())
    for data in lines:
        text = json.dumps(data, ensure_ascii=False) if args.json else log_line(data)
        if text is not None:
            print(text, flush=args.follow)
    if args.follow and not args.json:
        from lev_nb.cli.run_status import status_text

        print(f"lev log: run {record.run_id} is {status_text(record.reload())}", file=sys.stderr)
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    """``lev context RUN_ID [--full] [--json]``."""
    from lev_nb.explain.context import context_json, context_text, last_request

    record = _open("context", args.run_id)
    if isinstance(record, int):
        return record
    request = last_request(record.transcript())
    if request is None:
        return fail("context", f"run {record.run_id} has made no model request yet (status: {record.meta.get('status')})")
    if args.json:
        print(json.dumps(context_json(record.run_id, request), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(context_text(record.run_id, request, full=args.full or is_verbose(args)))
    return 0


def cmd_stages(args: argparse.Namespace) -> int:
    """``lev stages RUN_ID [--regions] [--json]``."""
    from lev_nb.explain.ledger import ledger, ledger_text, region_peaks

    record = _open("stages", args.run_id)
    if isinstance(record, int):
        return record
    if args.json:
        data: dict[str, Any] = {"run_id": record.run_id, "cost_usd": record.meta.get("cost_usd"),
                                "stages": [row.to_dict() for row in ledger(record.meta)]}
        if args.regions or is_verbose(args):
            data["regions"] = region_peaks(record.transcript())
        print(json.dumps(data, indent=2))
    else:
        sys.stdout.write(ledger_text(record, regions=args.regions or is_verbose(args)))
    return 0


def _who() -> str:
    """Who cancels, as the run's record names them."""
    return f"lev cancel (pid {os.getpid()})"


def cmd_cancel(args: argparse.Namespace) -> int:
    """``lev cancel RUN_ID``."""
    from lev_nb.explain.control import cancel

    record = _open("cancel", args.run_id)
    if isinstance(record, int):
        return record
    done = cancel(record, _who())
    if not done.ok:
        return fail("cancel", done.message)
    print(done.message)
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    """``lev kill RUN_ID [--force]``."""
    from lev_nb.explain.control import kill

    record = _open("kill", args.run_id)
    if isinstance(record, int):
        return record
    done = kill(record, force=args.force)
    if not done.ok:
        return fail("kill", done.message)
    print(done.message)
    return 0
