"""``lev run``, ``lev resume``, ``lev ps`` and ``lev result``: running a blueprint, continuing a
paused or killed run, and reading what runs left.

The run itself is :func:`lev_nb.engine.api.start_run`; the run record is :mod:`lev_nb.store`.
This module owns the command lines, their messages and their exit statuses.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from lev_nb.cli.verbosity import add_verbose, is_verbose

# `lev run --count N` keeps N runs (threads, records, open files) in one process; past this a
# batch belongs on worker processes (--workers, lev_nb.run_many).
MAX_COUNT = 1000

RUN_EPILOG = """\
examples:
  lev run blueprints/triage --task @blueprints/triage/reports.txt --model mock
  lev run blueprints/code-fixer --task "Fix the failing test" --workdir ./my-project
  lev run blueprints/triage --task @reports.txt --output-format json --json
  lev run blueprints/code-fixer --task "Fix the failing test" --allow write_file --allow edit_file
  lev run blueprints/triage --task @reports.txt --model mock --count 3   # three copies at once

Without --model each stage runs on its own model block (ANTHROPIC_API_KEY must be set for
anthropic models); --model mock is a key-free dry run.

A tool whose permission is `ask` (write_file, edit_file and shell by default), a question from
the agent (ask_user_*, present_for_review, edit_document) and a checkpoint are asked here when
stdin is a terminal; `lev respond RUN_ID` answers from another terminal and `lev msg RUN_ID TEXT`
sends the agent a message. Elsewhere (or with --unattended) an `ask` tool is denied: --allow TOOL
or --yolo let it run.

A caller input of the blueprint is given as --<input> TEXT or @FILE; `lev validate PATH` lists
them. A workdir that does not exist yet is created.

What changes what the run produced or did (an answer accepted unchecked, a tool denied because
nobody could approve it, a forced gate, a fallback) is told on stderr as it happens, one
"warning" line each, and kept in meta.json `warnings`; the run ends with a summary line
(status, stages, calls, cost, warnings). -v tells every event as it happens.

Agents may start agents (spawn_agent, fan_out): --max-depth N limits how many levels of them
may start below the run (0: none; it wins over the blueprint's [agent] max_child_depth and the
configuration's [limits] max_child_depth, default 3). `lev ps` lists each child under its parent.
--count N starts N copies of the run with the same inputs, waits for all of them and prints
their ids (one a line; a JSON list with --json); at most MAX_COUNT copies run in one process, a
bigger batch takes --workers K. Copies are never asked at the terminal: a tool
that would ask is denied unless --allow TOOL or --yolo lets it run.

exit status: 0 the run (every copy of it) completed; 1 it ended in error or was cut short, the
blueprint cannot be loaded, or its --webhook failed; 2 a bad command line, or a run that cannot
start as asked (nothing is written); 3 the run paused (out of credits, provider out of reach: set
that up, then `lev resume RUN_ID`); 130 stopped with Ctrl-C (its record says paused, interrupted:
`lev resume RUN_ID` continues it).
"""

# Every option string of `lev run` (filled by add_run): a --name that is not one of them is a
# caller input of the blueprint, or a mistake.
RUN_OPTIONS: dict[str, bool] = {}  # option string -> whether it takes a value


def add_run(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev run``."""
    run = subparsers.add_parser(
        "run",
        # Caller inputs are free-form --<name> options, so none may be read as an abbreviation.
        allow_abbrev=False,
        help="run a blueprint to the end in this process",
        description=(
            "Run an agent to the end in this process, showing progress on stderr, and print its run\n"
            "id. The blueprint's caller inputs are given as --<input> TEXT (or @FILE)."
        ),
        epilog=RUN_EPILOG.replace("MAX_COUNT", str(MAX_COUNT)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("path", nargs="?", default=".", help="agent folder or its agent.leviath (default: .)")
    run.add_argument("-t", "--task", default="",
                     help="the task: TEXT, or a FILE (or @FILE) holding it; a path with no file behind it is an error")
    run.add_argument(
        "-m", "--model", default=None,
        help="override every stage's model: provider/model, mock, or scripted:FILE",
    )
    run.add_argument("--workdir", default=None, metavar="DIR",
                     help="working directory, created if missing (default: a fresh folder in the run record)")
    run.add_argument("--output-format", default=None, metavar="LABEL",
                     help="ask for the final answer in this format (json, xml, yaml, csv, toml are checked)")
    run.add_argument("--output-instructions", default=None, metavar="TEXT", help="instructions for the final answer")
    run.add_argument("--output-schema", default=None, metavar="JSON|@FILE",
                     help="JSON Schema the answer must satisfy: JSON text or @FILE")
    run.add_argument("--webhook", default=None, metavar="URL", help="POST the result as JSON to this URL when the run ends")
    run.add_argument("--allow", action="append", default=[], metavar="TOOL",
                     help="let TOOL run without asking (repeatable; beats the blueprint and config.toml)")
    run.add_argument("--yolo", action="store_true",
                     help="run every tool that would ask without asking (a deny stays a deny)")
    run.add_argument("--unattended", action="store_true",
                     help="never ask at the terminal: a tool that would ask is denied, a question gets no answer")
    run.add_argument("--no-seed-commands", action="store_true",
                     help="do not run the blueprint's command seeds (seed = { command = ... }) for this run")
    run.add_argument("--max-depth", type=int, default=None, metavar="N",
                     help="how many levels of sub-agents may start below this run (0: none)")
    run.add_argument("--count", type=int, default=1, metavar="N",
                     help="start N copies of the run with the same inputs and wait for all (default 1; "
                          f"at most {MAX_COUNT} unless --workers is given)")
    run.add_argument("--json", action="store_true",
                     help="print the run's meta.json instead of its id (with --count: a JSON list of the ids)")
    run.add_argument("--quiet", action="store_true",
                     help="no progress line and no summary on stderr (warnings are still told)")
    add_verbose(run, "run")
    run.add_argument("--workers", type=int, default=None, metavar="K",
                     help="run the --count copies across K worker processes (lev_nb.run_many); prints one id a line")
    for action in run._actions:
        for option in action.option_strings:
            RUN_OPTIONS[option] = action.nargs != 0
    run.set_defaults(func=cmd_run)


def split_run_argv(argv: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """Take the free-form ``--<input> VALUE`` options out of a ``lev run`` command line.

    Returns the tokens argparse should see and the ``(--name, value)`` pairs it should not
    (``value`` None when none follows). Only the tokens after the ``run`` command are looked at;
    ``--name=value`` and ``--name value`` both work, and a value is never a known option.
    """
    index = _command_index(argv)
    if index is None or argv[index] != "run":
        return argv, []
    kept = argv[: index + 1]
    extra: list[tuple[str, str | None]] = []
    tokens = argv[index + 1:]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            kept.extend(tokens[i:])
            break
        name = token.partition("=")[0]
        if name in RUN_OPTIONS or not token.startswith("--") or len(token) < 3:
            kept.append(token)
            if name in RUN_OPTIONS and RUN_OPTIONS[name] and "=" not in token and i + 1 < len(tokens):
                kept.append(tokens[i + 1])  # the option's value, whatever it looks like
                i += 1
        elif "=" in token:
            extra.append((name, token.partition("=")[2]))
        elif i + 1 < len(tokens) and tokens[i + 1] not in RUN_OPTIONS and tokens[i + 1] != "--":
            extra.append((name, tokens[i + 1]))
            i += 1
        else:
            extra.append((name, None))
        i += 1
    return kept, extra


def _command_index(argv: list[str]) -> int | None:
    """Where the subcommand is in ``argv`` (global options, such as ``-c KEY=VALUE``, come first)."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "-c":
            i += 2
            continue
        if not token.startswith("-"):
            return i
        i += 1
    return None


RESUME_EPILOG = """\
examples:
  lev resume RUN_ID                      continue a paused run after topping up the account
  lev resume RUN_ID --model scripted:NEXT.json

A run can be resumed when it is paused (lev ps shows why) or when the process that ran it was
killed. It continues in its own folder under the same id: model turns and tool results already
recorded are replayed from its journal (a completed tool call is never run again), then it goes
on. exit status: as lev run; 1 also when the run cannot be resumed (it ended, it is still
running, or no run has that id).
"""


def add_resume(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev resume``."""
    resume = subparsers.add_parser(
        "resume", help="continue a paused or killed run from its record",
        description="Continue a paused run, or one whose process was killed, to the end in this process.",
        epilog=RESUME_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    resume.add_argument("run_id", help="a run id (or a unique prefix of one)")
    resume.add_argument("-m", "--model", default=None,
                        help="use this model spec instead of the one the run was started with")
    resume.add_argument("--json", action="store_true", help="print the run's meta.json instead of its id")
    resume.add_argument("--quiet", action="store_true",
                        help="no progress line and no summary on stderr (warnings are still told)")
    add_verbose(resume, "resume")
    resume.add_argument("--unattended", action="store_true",
                        help="do not ask at this terminal (as lev run --unattended)")
    resume.set_defaults(func=cmd_resume)


def cmd_resume(args: argparse.Namespace) -> int:
    """``lev resume RUN_ID``: continue the run to its end (or its next pause), like ``lev run``."""
    from lev_nb.engine.launch import LaunchError
    from lev_nb.engine.resume import ResumeError, resume_run
    from lev_nb.scripting import ScriptError
    from lev_nb.settings import ConfigError
    from lev_nb.store import RecordUnwritable

    with _Interrupts() as interrupts:
        try:
            # Asks at the terminal as lev run does (it denied every `ask` tool before).
            run = resume_run(args.run_id, model=args.model, interactive=_at_terminal() and not args.unattended)
        except LaunchError as exc:
            print(f"lev resume: {exc.for_cli()}", file=sys.stderr)
            return 1
        except (ResumeError, ConfigError, ScriptError, ValueError, RecordUnwritable) as exc:
            print(f"lev resume: {exc}", file=sys.stderr)
            return 1
        interrupts.attach(run)
        return _follow(run, args, resumed=True)


def add_ps(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev ps``."""
    ps = subparsers.add_parser(
        "ps", help="list runs", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=("List runs recorded under $LEV_HOME/runs: live runs, then the newest 20 finished ones,\n"
                     "each with the runs it started under it. A run whose process is gone while it was\n"
                     "running (abandoned) is counted on one line at the end, not listed: --all lists\n"
                     "them, `lev resume RUN_ID` continues one."))
    ps.add_argument("--json", action="store_true",
                    help="print one JSON object: runs (live), finished, abandoned (listed with --all, else "
                         "only under a listed run) and abandoned_not_listed (how many were left out)")
    ps.add_argument("--all", action="store_true", help="every recorded run, abandoned ones included")
    ps.set_defaults(func=cmd_ps)


def add_result(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev result``."""
    result = subparsers.add_parser(
        "result", help="print a run's final output",
        description=("Print the final output of a recorded run: the answer its agent submitted, with "
                     "its format and stage (--raw: the answer alone; --json: as a JSON record)."),
        epilog="examples:\n  lev result RUN_ID\n  lev result RUN_ID --raw > answer.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument("run_id", help="a run id (or a unique prefix of one)")
    shape = result.add_mutually_exclusive_group()
    shape.add_argument("--raw", action="store_true", help="the answer's bytes alone, for a pipeline")
    shape.add_argument("--json", action="store_true", help="the answer with its format, stage and time")
    result.set_defaults(func=cmd_result)


class UsageError(Exception):
    """A bad command line; printed on one line, exit status 2."""


def _read_at(value: str, what: str) -> str:
    """``value`` itself, or the text of the file it names as ``@FILE``."""
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read {what} from '{path}': {exc.strerror or exc}") from None
    return value


def read_task(value: str) -> str:
    """The task of ``lev run -t VALUE`` as the upstream reads it: ``@FILE``, or a value naming a file
    that exists is that file's text; a value that looks like a path (no space, and a ``/``, ``\\`` or a
    leading ``~``) with no file behind it is an error, so a mistyped file name never becomes the
    task; anything else is the task itself."""
    if value.startswith("@"):
        return _read_at(value, "--task")
    if value and "\n" not in value and len(value) < 4096:
        path = Path(value).expanduser()
        if path.is_file():
            return _read_at(f"@{path}", "--task")
        if " " not in value and ("/" in value or "\\" in value or value.startswith("~")):
            raise UsageError(f"--task '{value}' looks like a file, and there is no such file (fix the path, "
                             "or write the task as a sentence)")
    return value


def parse_inputs(
    given: list[tuple[str, str | None]],
    *,
    declared: Collection[str],
    agent: str,
    reserved: Collection[str] = (),
) -> dict[str, str]:
    """The caller inputs of a ``lev run`` command line: the ``(--name, value)`` pairs
    :func:`split_run_argv` set aside, each of which must name one of the blueprint's ``declared``
    inputs (``--my-input`` also matches ``my_input``).

    Raises UsageError for a name that is neither an option of ``lev run`` nor a declared input
    (with a "did you mean" over both), for an input with no value, and for a name in ``reserved``
    (the run's own keyword parameters: passed on, it would set that parameter instead).
    """
    from lev_nb.blueprint.errors import did_you_mean

    inputs: dict[str, str] = {}
    for option, value in given:
        name = option[2:]
        key = name if name in declared else name.replace("-", "_")
        if key not in declared:
            # Given a value, the option meant is one that takes one (--colour red is not --yolo).
            candidates = [o for o in RUN_OPTIONS if o.startswith("--") and o != "--help"
                          and (value is None or RUN_OPTIONS[o])]
            candidates += [f"--{k}" for k in declared]
            hint = did_you_mean(option, candidates)
            if hint:
                raise UsageError(f"unknown option {option} ({hint.replace(chr(39), '')})")
            takes = (f"its inputs are {', '.join(f'--{k}' for k in declared)}" if declared
                     else "it declares no inputs besides --task")
            raise UsageError(
                f"unknown option {option}: it is not an option of lev run, and blueprint '{agent}' "
                f"has no such input ({takes}; see lev run --help)"
            )
        if key in reserved:
            raise UsageError(f"{option} is not an option of lev run and cannot name a caller input")
        if value is None:
            raise UsageError(f"{option} needs a value (TEXT, or @FILE to read it from a file)")
        inputs[key] = _read_at(value, option)
    return inputs


def _run_parameters(start: Callable[..., Any]) -> frozenset[str]:
    """The named keyword parameters of ``start`` (``start_run``): names no caller input may take."""
    import inspect

    return frozenset(
        p.name for p in inspect.signature(start).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def cmd_run(args: argparse.Namespace) -> int:
    """``lev run``: run to the end, print the run id (or meta JSON); exit 0 only when complete.

    Everything that can be refused is refused before the run exists (exit 2, or 1 for a
    blueprint that cannot be loaded). A Ctrl-C while the blueprint is read stops at once (exit
    130, nothing written); from the moment the run is being created, the first Ctrl-C stops it
    resumably (its record says paused, interrupted; exit 130) and further ones only wait for that.
    """
    from lev_nb.blueprint import BlueprintError
    from lev_nb.catalog import load_argument
    from lev_nb.engine.api import start_run
    from lev_nb.engine.launch import LaunchError
    from lev_nb.scripting import ScriptError
    from lev_nb.store import RecordUnwritable
    from lev_nb.settings import ConfigError

    try:
        if args.count < 1:
            raise UsageError(f"--count must be 1 or more, got {args.count}")
        if args.count > MAX_COUNT and args.workers is None:
            raise UsageError(f"--count {args.count} is more than {MAX_COUNT} copies in one process; for a bigger "
                             "batch add --workers K (worker processes) or call lev_nb.run_many")
        if args.max_depth is not None and args.max_depth < 0:
            raise UsageError(f"--max-depth must be 0 or more, got {args.max_depth}")
        bp = load_argument(args.path)  # a path or an agent's name, never TOML text
        declared = [i.key for i in bp.inputs if i.key != "task"]
        inputs = parse_inputs(getattr(args, "extra", []), declared=declared, agent=bp.name,
                              reserved=_run_parameters(start_run))
        task = read_task(args.task)
        schema = None
        if args.output_schema:
            text = _read_at(args.output_schema, "--output-schema")
            try:
                schema = json.loads(text)
            except ValueError as exc:
                raise UsageError(f"--output-schema is not valid JSON: {exc}") from None
        # parse_inputs refused every name of start_run's own parameters, so these only fill
        # ``**inputs``; typed Any because mypy cannot see that the keys never hit those parameters.
        caller_inputs: dict[str, Any] = inputs
    except (UsageError, BlueprintError, ConfigError, ScriptError, ValueError) as exc:
        print(f"lev run: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    if args.workers is not None:
        from lev_nb.cli.batch_run import run_batch

        return run_batch(bp, task, schema, caller_inputs, args)
    # From here on a Ctrl-C never cuts the run in half: the first one stops it so that it can be
    # resumed (once it exists), the record says so, and further ones only wait for that.
    with _Interrupts() as interrupts:
        runs: list[Any] = []
        for _ in range(args.count):
            try:
                run = start_run(
                    bp,
                    task=task,
                    model=args.model,
                    workdir=args.workdir,
                    output_format=args.output_format,
                    output_instructions=args.output_instructions,
                    output_schema=schema,
                    webhook=args.webhook,
                    max_depth=args.max_depth,
                    allow=args.allow,
                    yolo=args.yolo,
                    seed_commands=not args.no_seed_commands,
                    # copies started with --count are never asked (one prompt cannot tell them
                    # apart): a tool that would ask is denied, as for an unattended run
                    interactive=args.count == 1 and _at_terminal() and not args.unattended,
                    **caller_inputs,
                )
            except LaunchError as exc:
                print(f"lev run: {exc.for_cli()}", file=sys.stderr)
                return 2 if not runs else _cancel_started(runs)
            except (ConfigError, ScriptError, ValueError, RecordUnwritable) as exc:
                print(f"lev run: {exc}", file=sys.stderr)
                return 1 if not runs else _cancel_started(runs)
            interrupts.attach(run)
            runs.append(run)
        if len(runs) == 1:
            return _follow(runs[0], args)
        return _follow_all(runs, args)


def _cancel_started(runs: list[Any]) -> int:
    """A copy of a --count run could not start: stop the ones that did (they say cancelled)."""
    for run in runs:
        run.cancel()
    for run in runs:
        _wait_quietly(run)
    print(f"lev run: cancelled the {len(runs)} cop{'y' if len(runs) == 1 else 'ies'} already started", file=sys.stderr)
    return 1


def _wait_quietly(run: Any) -> None:
    while True:
        # A short timed wait, not one long one: a Ctrl-C that the kernel hands to another thread
        # is only acted on when this thread runs again.
        try:
            run.wait(WAKE_EVERY_S)
            return
        except TimeoutError:
            continue


def _follow_all(runs: list[Any], args: argparse.Namespace) -> int:
    """``--count N``: wait for every copy (one line on stderr as each ends), print the ids (or a
    JSON list of them); the exit status is the worst of the copies'."""
    from lev_nb.cli.progress import Teller
    from lev_nb.cli.run_status import status_text

    if not args.quiet:
        print(f"lev run: started {len(runs)} copies: {', '.join(r.run_id for r in runs)}", file=sys.stderr)
        if _at_terminal() and not (args.yolo or args.allow or args.unattended):
            print("lev run: copies are not asked at the terminal: a tool that would ask is denied "
                  "(--allow TOOL or --yolo lets it run)", file=sys.stderr)
        for run in runs:  # each copy's warnings as they happen, named by its run id
            run.subscribe(Teller(sys.stderr, f"lev run {run.run_id}"))
    for run in runs:
        _wait_quietly(run)
        if not args.quiet:
            told = len(run.warnings)
            warned = f" ({told} warning{'s' if told != 1 else ''} — lev show {run.run_id})" if told else ""
            print(f"lev run: {run.run_id} ended {status_text(run.meta)}{warned}", file=sys.stderr)
    if args.json:
        print(json.dumps([r.run_id for r in runs]))
    else:
        for run in runs:
            print(run.run_id)
    failed = [r for r in runs if r.status != "complete"]
    status = 0
    if failed:
        print(f"lev run: {len(failed)} of {len(runs)} copies did not complete", file=sys.stderr)
        status = 130 if any(r.status == "cancelled" or _interrupted(r) for r in failed) else 1
    for run in runs:
        if run.webhook_error is not None:
            print(f"lev run: {run.run_id}: the result was not delivered to the webhook: {run.webhook_error}",
                  file=sys.stderr)
            status = status or 1
    return status


def _follow(run: Any, args: argparse.Namespace, resumed: bool = False) -> int:
    """Wait for ``run`` with the progress line, report how it ended; returns the exit status.
    A ``resumed`` run's progress starts where it resumes (its earlier events are its past)."""
    from lev_nb.cli.interaction_commands import TerminalPrompter
    from lev_nb.cli.progress import ProgressLine, Teller
    from lev_nb.cli.run_status import status_text, summary_line

    prog = f"lev {getattr(args, 'command', None) or 'run'}"
    verbose = bool(getattr(args, "verbose", False))
    # -v tells every event, which the progress line would only repeat.
    progress = None if args.quiet or verbose else ProgressLine(sys.stderr)
    teller = Teller(sys.stderr, prog, progress, verbose=verbose)
    count = (run.meta.get("resumed") or {}).get("count", 0)
    for follower in ([progress] if progress is not None else []) + [teller]:
        run.subscribe(_from_resume(follower, count) if resumed else follower)
    prompter = TerminalPrompter(run, sys.stdin, sys.stderr, progress) if run.interactive else None
    while True:
        # A short timed wait, not one long one: a Ctrl-C that the kernel hands to another thread
        # is only acted on when this thread runs again.
        try:
            run.wait(WAKE_EVERY_S)
            break
        except TimeoutError:
            if prompter is not None:
                prompter.step()
            continue
    if progress is not None:
        progress.close()
    if args.json:
        print(json.dumps(run.meta, indent=2))
    else:
        print(run.run_id)
    if not args.quiet:  # the summary first: how the run ended, in full, is the last word
        print(f"{prog}: {summary_line(run.meta)}", file=sys.stderr)
    status = 0
    if run.status == "paused":
        print(f"{prog}: the run {run.pause_reason}", file=sys.stderr)
        status = 130 if _interrupted(run) else 3
    elif run.status != "complete":
        print(f"{prog}: the run ended {status_text(run.meta)}", file=sys.stderr)
        status = 130 if run.status == "cancelled" else 1
    if run.webhook_error is not None:
        print(f"{prog}: the result was not delivered to the webhook: {run.webhook_error}", file=sys.stderr)
        status = status or 1
    return status


WAKE_EVERY_S = 0.2


def _interrupted(run: Any) -> bool:
    """Whether ``run`` paused because it was stopped with Ctrl-C."""
    return run.status == "paused" and (run.meta.get("needs_setup") or {}).get("blocker") == "interrupted"


def _at_terminal() -> bool:
    """Whether a person can answer at this terminal (stdin is a tty)."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _from_resume(callback: Callable[[Any], None], count: int) -> Callable[[Any], None]:
    """``callback`` for the events from the run's ``count``-th ``resumed`` event on (the events
    before it are the run's past lives, which run.events replays first)."""
    following = False

    def follow(event: Any) -> None:
        nonlocal following
        if event.kind == "resumed" and event.count == count:
            following = True
        elif following:
            callback(event)

    return follow


class _Interrupts:
    """While inside: SIGINT (Ctrl-C) stops every run attached so that it can be resumed (it pauses,
    blocker ``interrupted``; a --count run has several; a Ctrl-C that comes while one is being
    created stops it as soon as it exists), says so once with the command that continues it,
    and is otherwise ignored, so each run ends with a record that says how it ended. Outside the main thread, where no
    handler can be set (and no KeyboardInterrupt arrives), it does nothing."""

    def __init__(self) -> None:
        self.runs: list[Any] = []
        self.count = 0
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> _Interrupts:
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        except ValueError:  # not the main thread
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            # After a Ctrl-C the command is on its way out: later ones are ignored by the kernel
            # (a Python handler is reset to the default while the interpreter shuts down).
            signal.signal(signal.SIGINT, signal.SIG_IGN if self.count else self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count == 1:
            which = self.runs[0].run_id if len(self.runs) == 1 else "RUN_ID"
            print(f"lev run: stopping the run; `lev resume {which}` continues it (Ctrl-C again does not stop "
                  "it sooner)", file=sys.stderr)
        for run in list(self.runs):
            run.interrupt()

    def attach(self, run: Any) -> None:
        """A run now exists: stop it at once if a Ctrl-C already came."""
        self.runs.append(run)
        if self.count:
            run.interrupt()


def cmd_ps(args: argparse.Namespace) -> int:
    """``lev ps``: live runs, then finished ones (the newest 20 unless --all); abandoned runs are
    counted on one line unless --all."""
    from lev_nb.cli.run_status import print_ps

    print_ps(all_runs=args.all, as_json=args.json, verbose=is_verbose(args))
    return 0


def cmd_result(args: argparse.Namespace) -> int:
    """``lev result RUN_ID [--raw | --json]``."""
    from lev_nb.cli.run_status import status_text
    from lev_nb.engine.pipeline.outputs import FinalOutput
    from lev_nb.store import RunNotFound, find_run

    try:
        store = find_run(args.run_id)
    except (RunNotFound, ValueError) as exc:  # ValueError: not a run id at all (e.g. "..")
        print(f"lev result: {exc}", file=sys.stderr)
        return 1
    try:
        meta = store.read_meta()
    except (OSError, ValueError) as exc:
        print(
            f"lev result: the record of run '{store.run_id}' cannot be read ({exc}); it may still be "
            "starting, or its meta.json is damaged",
            file=sys.stderr,
        )
        return 1
    descriptor = meta.get("final_output")
    raw = store.read_final_output()
    if not descriptor or raw is None:
        print(
            f"lev result: run '{store.run_id}' produced no final output (status: {status_text(meta)}). "
            "Only an agent that calls `submit_output` has an answer to show; look at its files in "
            f"{meta.get('workdir') or 'its workdir'}, or at what it did with `lev show {store.run_id}`.",
            file=sys.stderr,
        )
        return 1
    content = raw.decode("utf-8", errors="replace")
    if args.raw:
        out = sys.stdout.buffer
        out.write(raw if raw.endswith(b"\n") else raw + b"\n")
        out.flush()
        return 0
    if args.json:
        # The same record a webhook receives: FinalOutput owns its shape.
        answer = FinalOutput(
            content=content,
            format=descriptor.get("format"),
            stage=descriptor.get("stage"),
            submitted_at=descriptor.get("submitted_at"),
            truncated=bool(descriptor.get("truncated")),
            artifacts=list(descriptor.get("artifacts") or []),
        )
        print(json.dumps(answer.to_json(), indent=2, ensure_ascii=False))
        return 0
    fmt = f" ({descriptor['format']})" if descriptor.get("format") else ""
    text = f"Final output{fmt} from run '{store.run_id}', stage '{descriptor.get('stage')}':\n\n{content}"
    if not text.endswith("\n"):
        text += "\n"
    if descriptor.get("truncated"):
        text += "\n[truncated: the agent's answer was longer than the size limit and was cut short]\n"
    artifacts = descriptor.get("artifacts") or []
    if artifacts:
        text += f"\nFiles produced ({len(artifacts)}):\n" + "".join(f"  {a}\n" for a in artifacts)
    sys.stdout.write(text)
    return 0
