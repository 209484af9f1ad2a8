"""``lev run``, ``lev ps`` and ``lev result``: running a blueprint and reading what runs left.

The run itself is :func:`lev_nb.engine.api.start_run`; the run record is :mod:`lev_nb.store`.
This module owns the command lines, their messages and their exit statuses.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any


def add_run(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev run``."""
    run = subparsers.add_parser(
        "run",
        # Caller inputs are free-form --<name> options, so none may be read as an abbreviation.
        allow_abbrev=False,
        help="run a blueprint to the end in this process",
        description=(
            "Run an agent to the end, showing progress on stderr, and print its run id. Caller "
            "inputs of the blueprint are given as --<input> TEXT (or @FILE)."
        ),
    )
    run.add_argument("path", nargs="?", default=".", help="agent folder or its agent.leviath")
    run.add_argument("-t", "--task", default="", help="the task (TEXT, or @FILE to read it)")
    run.add_argument(
        "-m", "--model", default=None,
        help="override every stage's model: provider/model, mock, or scripted:FILE",
    )
    run.add_argument("--workdir", default=None, help="working directory (default: a fresh folder in the run record)")
    run.add_argument("--output-format", default=None, help="ask for the final answer in this format")
    run.add_argument("--output-instructions", default=None, help="instructions for the final answer")
    run.add_argument("--output-schema", default=None, help="JSON Schema for the answer: JSON text or @FILE")
    run.add_argument("--webhook", default=None, help="POST the result as JSON to this URL when the run ends")
    run.add_argument("--json", action="store_true", help="print the run's meta.json instead of its id")
    run.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    run.set_defaults(func=cmd_run, accepts_extra=True)


def add_ps(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev ps``."""
    ps = subparsers.add_parser("ps", help="list runs", description="List runs recorded under $LEV_HOME/runs.")
    ps.add_argument("--json", action="store_true", help="print JSON")
    ps.add_argument("--all", action="store_true", help="every recorded run, not only recent ones")
    ps.set_defaults(func=cmd_ps)


def add_result(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev result``."""
    result = subparsers.add_parser("result", help="print a run's final output")
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


def parse_inputs(extra: list[str], *, reserved: Collection[str] = ()) -> dict[str, str]:
    """``--name VALUE`` / ``--name=VALUE`` pairs left over by argparse, as caller inputs.

    A name in ``reserved`` (the run's own keyword parameters) is a usage error: passed on, it would
    set that parameter instead of a caller input.
    """
    inputs: dict[str, str] = {}
    i = 0
    while i < len(extra):
        token = extra[i]
        if not token.startswith("--") or len(token) < 3:
            raise UsageError(f"unexpected argument '{token}'")
        name, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 >= len(extra):
                raise UsageError(f"--{name} needs a value")
            value = extra[i + 1]
            i += 1
        key = name.replace("-", "_")
        if key in reserved:
            raise UsageError(f"--{name} is not an option of lev run and cannot name a caller input")
        inputs[key] = _read_at(value, f"--{name}")
        i += 1
    return inputs


def _run_parameters(start: Callable[..., Any]) -> frozenset[str]:
    """The named keyword parameters of ``start`` (``start_run``): names no caller input may take."""
    return frozenset(
        p.name for p in inspect.signature(start).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def cmd_run(args: argparse.Namespace) -> int:
    """``lev run``: run to the end, print the run id (or meta JSON); exit 0 only when complete."""
    from lev_nb.blueprint import BlueprintError, load
    from lev_nb.cli.progress import ProgressLine
    from lev_nb.cli.run_status import status_text
    from lev_nb.engine.api import start_run
    from lev_nb.scripting import ScriptError
    from lev_nb.store import RecordUnwritable

    try:
        inputs = parse_inputs(getattr(args, "extra", []), reserved=_run_parameters(start_run))
        task = _read_at(args.task, "--task")
        schema = None
        if args.output_schema:
            text = _read_at(args.output_schema, "--output-schema")
            try:
                schema = json.loads(text)
            except ValueError as exc:
                raise UsageError(f"--output-schema is not valid JSON: {exc}") from None
        bp = load(args.path)
        # parse_inputs refused every name of start_run's own parameters, so these only fill
        # ``**inputs``; typed Any because mypy cannot see that the keys never hit those parameters.
        caller_inputs: dict[str, Any] = inputs
        run = start_run(
            bp,
            task=task,
            model=args.model,
            workdir=args.workdir,
            output_format=args.output_format,
            output_instructions=args.output_instructions,
            output_schema=schema,
            webhook=args.webhook,
            **caller_inputs,
        )
    except (UsageError, BlueprintError, ValueError, ScriptError, RecordUnwritable) as exc:
        print(f"lev run: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    progress = None if args.quiet else ProgressLine(sys.stderr)
    if progress is not None:
        run.subscribe(progress)
    try:
        run.wait()
    except KeyboardInterrupt:
        run.cancel()
        run.wait()
    if progress is not None:
        progress.close()
    from lev_nb.engine.webhook import FAILURE_PREFIX

    for event in run.events.snapshot():  # a failed delivery is shown even with --quiet
        message = getattr(event, "message", "")
        if event.kind == "warning" and message.startswith(FAILURE_PREFIX):
            print(f"lev run: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps(run.meta, indent=2))
    else:
        print(run.run_id)
    if run.status != "complete":
        print(f"lev run: the run ended {status_text(run.meta)}", file=sys.stderr)
        return 130 if run.status == "cancelled" else 1
    return 0


def cmd_ps(args: argparse.Namespace) -> int:
    """``lev ps``: running runs, then finished ones (the newest 20 unless --all)."""
    from lev_nb.cli.run_status import print_ps

    print_ps(all_runs=args.all, as_json=args.json)
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
            f"{meta.get('workdir') or 'its workdir'} or at its events with `lev ps`.",
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
