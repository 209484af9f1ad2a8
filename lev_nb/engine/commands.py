"""``lev run``, ``lev ps``, ``lev result`` and ``lev graph`` (registered by :mod:`lev_nb.cli`)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

TERMINAL = ("complete", "error", "cancelled")
ABANDONED_AFTER_S = 300


def add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the run-related subcommands."""
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

    ps = subparsers.add_parser("ps", help="list runs", description="List runs recorded under $LEV_HOME/runs.")
    ps.add_argument("--json", action="store_true", help="print JSON")
    ps.add_argument("--all", action="store_true", help="every recorded run, not only recent ones")
    ps.set_defaults(func=cmd_ps)

    result = subparsers.add_parser("result", help="print a run's final output")
    result.add_argument("run_id", help="a run id (or a unique prefix of one)")
    shape = result.add_mutually_exclusive_group()
    shape.add_argument("--raw", action="store_true", help="the answer's bytes alone, for a pipeline")
    shape.add_argument("--json", action="store_true", help="the answer with its format, stage and time")
    result.set_defaults(func=cmd_result)

    graph = subparsers.add_parser("graph", help="print the blueprint as a Mermaid flowchart")
    graph.add_argument("path", nargs="?", default=".", help="agent folder or its agent.leviath")
    graph.add_argument("--direction", default="LR", choices=["LR", "TB", "RL", "BT"])
    graph.set_defaults(func=cmd_graph)


class UsageError(Exception):
    """A bad command line; printed on one line, exit status 2."""


def _read_at(value: str, what: str) -> str:
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read {what} from '{path}': {exc.strerror or exc}") from None
    return value


def parse_inputs(extra: list[str]) -> dict[str, str]:
    """``--name VALUE`` / ``--name=VALUE`` pairs left over by argparse, as caller inputs."""
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
        inputs[name.replace("-", "_")] = _read_at(value, f"--{name}")
        i += 1
    return inputs


def cmd_run(args: argparse.Namespace) -> int:
    """``lev run``: run to the end, print the run id (or meta JSON); exit 0 only when complete."""
    from lev_nb.blueprint import BlueprintError, load
    from lev_nb.engine.api import start_run
    from lev_nb.scripting import ScriptError

    try:
        inputs = parse_inputs(getattr(args, "extra", []))
        task = _read_at(args.task, "--task")
        schema = None
        if args.output_schema:
            text = _read_at(args.output_schema, "--output-schema")
            try:
                schema = json.loads(text)
            except ValueError as exc:
                raise UsageError(f"--output-schema is not valid JSON: {exc}") from None
        bp = load(args.path)
        run = start_run(
            bp,
            task=task,
            model=args.model,
            workdir=args.workdir,
            output_format=args.output_format,
            output_instructions=args.output_instructions,
            output_schema=schema,
            webhook=args.webhook,
            **inputs,
        )
    except (UsageError, BlueprintError, ValueError, ScriptError) as exc:
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
    if args.json:
        print(json.dumps(run.meta, indent=2))
    else:
        print(run.run_id)
    if run.status != "complete":
        print(f"lev run: the run ended {status_text(run.meta)}", file=sys.stderr)
        return 130 if run.status == "cancelled" else 1
    return 0


class ProgressLine:
    """A one-line progress display: rewritten in place on a terminal, one line per step elsewhere."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.stage = ""
        self.iteration = 0
        self._width = 0

    def __call__(self, event: Any) -> None:
        kind = event.kind
        if kind == "stage_entered":
            self.stage = event.stage
            self._show(f"stage {self.stage}", permanent=not self.tty)
        elif kind == "model_call":
            self.iteration = event.iteration
            self._show(f"stage {self.stage} · turn {self.iteration}")
        elif kind == "tool_started":
            self._show(f"stage {self.stage} · turn {self.iteration} · {event.tool}")
        elif kind in ("gate_blocked", "gate_forced", "stuck", "error"):
            detail = getattr(event, "message", "") or getattr(event, "reason", "")
            self._show(f"stage {self.stage} · {kind.replace('_', ' ')}: {detail[:80]}", permanent=True)
        elif kind == "completed":
            self._show(f"{event.status}" + (f": {event.error}" if event.error else ""), permanent=True)

    def _show(self, text: str, permanent: bool = False) -> None:
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad + ("\n" if permanent else ""))
            self._width = 0 if permanent else len(text)
        elif permanent:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the line on a terminal."""
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()


def status_text(meta: dict[str, Any]) -> str:
    """The STATUS cell of ``lev ps``: the status, its error, and what the run left behind."""
    status = meta.get("status", "?")
    flags = meta.get("flags") or {}
    if status == "error":
        text = f"error: {meta.get('error') or 'unknown'}"
    elif status == "running" and _abandoned(meta):
        text = "running (abandoned)"
    else:
        text = status
    if status in TERMINAL and flags.get("empty_output"):
        text += " (no output)"
    if flags.get("splits_degraded"):
        text += " (fan-out empty)"
    return text


def _abandoned(meta: dict[str, Any]) -> bool:
    updated = meta.get("updated_at")
    if not isinstance(updated, str):
        return False
    try:
        when = datetime.fromisoformat(updated.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (datetime.now(timezone.utc) - when).total_seconds() > ABANDONED_AFTER_S


def cmd_ps(args: argparse.Namespace) -> int:
    """``lev ps``: running runs, then finished ones (the newest 20 unless --all)."""
    from lev_nb.store import list_runs

    metas = list_runs()
    running = [m for m in metas if m.get("status") not in TERMINAL and not m.get("broken")]
    finished = [m for m in metas if m not in running]
    if not args.all:
        finished = finished[:20]
    if args.json:
        print(json.dumps({"runs": [_row(m) for m in running], "finished": [_row(m) for m in finished]}, indent=2))
        return 0
    rows = _with_children_under_parents([_row(m) for m in running + finished], metas)
    if not rows:
        print("no runs yet; start one with `lev run PATH --task ...`")
        return 0
    header = ("RUN ID", "AGENT", "STATUS", "STAGE", "TURNS", "TOOLS", "UPDATED")
    table = [header] + [
        (("  └ " if r.get("parent_run_id") else "") + r["run_id"], r["agent_name"], r["status_text"],
         r["current_stage"], str(r["iteration"]), str(r["tool_calls"]), r["updated_at"])
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + row[-1])
    return 0


def _with_children_under_parents(rows: list[dict[str, Any]], metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worker runs listed right under the run that started them (or alone, when it is not shown)."""
    parents = {m.get("run_id"): m.get("parent_run_id") for m in metas}
    shown = {r["run_id"] for r in rows}
    for row in rows:
        parent = parents.get(row["run_id"])
        row["parent_run_id"] = parent if parent in shown else None
    top = [r for r in rows if not r["parent_run_id"]]
    ordered: list[dict[str, Any]] = []
    for row in top:
        ordered.append(row)
        ordered.extend(r for r in rows if r["parent_run_id"] == row["run_id"])
    return ordered


def _row(meta: dict[str, Any]) -> dict[str, Any]:
    flags = meta.get("flags") or {}
    return {
        "run_id": meta.get("run_id", "?"),
        "agent_name": meta.get("agent_name", "?"),
        "status": meta.get("status", "?"),
        "status_text": status_text(meta) if not meta.get("broken") else f"broken: {meta.get('error')}",
        "current_stage": meta.get("current_stage") or "",
        "iteration": meta.get("iteration", 0),
        "tool_calls": meta.get("tool_calls", 0),
        "started_at": meta.get("started_at", ""),
        "updated_at": meta.get("updated_at", ""),
        "empty_output": bool(flags.get("empty_output")),
        "has_final_output": bool(meta.get("final_output")),
        "parent_run_id": meta.get("parent_run_id"),
    }


def cmd_result(args: argparse.Namespace) -> int:
    """``lev result RUN_ID [--raw | --json]``."""
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
        record: dict[str, Any] = {"content": content}
        if descriptor.get("format"):
            record["format"] = descriptor["format"]
        record["stage"] = descriptor.get("stage")
        record["submitted_at"] = descriptor.get("submitted_at")
        record["truncated"] = bool(descriptor.get("truncated"))
        if descriptor.get("artifacts"):
            record["artifacts"] = descriptor["artifacts"]
        print(json.dumps(record, indent=2, ensure_ascii=False))
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


def cmd_graph(args: argparse.Namespace) -> int:
    """``lev graph PATH``: the blueprint as Mermaid text."""
    from lev_nb.blueprint import BlueprintError, load
    from lev_nb.blueprint.graph import blueprint_mermaid

    try:
        bp = load(args.path)
    except BlueprintError as exc:
        print(f"lev graph: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(blueprint_mermaid(bp, direction=args.direction))
    return 0
