"""A person in the loop at the command line (docs/runs.md#a-person-in-the-loop): ``lev msg``,
``lev respond`` and the prompt ``lev run`` shows at a terminal.

``lev msg`` and ``lev respond`` reach a run owned by another process through its inbox
(``RunStore.post_inbox``); the owner takes what is there at its next step, or while it waits for
an answer. They refuse, with one line, an unknown run, a run that is not live, and a request that
is not open. ``lev run`` at a terminal (stdin is a tty) asks each request on stderr between
progress lines; an answer from elsewhere (``lev respond``) withdraws the question, and Ctrl-C
still stops the run (resumably).
"""

from __future__ import annotations

import argparse
import json
import select
import time
from pathlib import Path
from typing import Any, TextIO

from lev_nb.cli.dispatch import fail
from lev_nb.text import clip_shown

ANSWER_WAIT_S = 5.0  # how long `lev respond` waits to see the run take its answer
ARG_CHARS = 300  # how much of one tool argument the terminal prompt shows
EOF = "<end of input>"  # what TerminalPrompter._line returns at the end of input (compared by identity)

MSG_EPILOG = """\
examples:
  lev msg RUN_ID "Also update the changelog"

The run must be live (started by `lev run` or Python in another process, and not ended). The
message reaches the model as a user turn at the run's next step in a stage that accepts messages
(accepts_messages = true, the default); until then it waits.
"""

RESPOND_EPILOG = """\
examples:
  lev respond                                   every open request of every live run
  lev respond RUN_ID                            the open requests of one run
  lev respond RUN_ID REQUEST_ID --approve --run allow the tool for the rest of the run
  lev respond RUN_ID REQUEST_ID --deny
  lev respond RUN_ID REQUEST_ID "Ada Lovelace"  answer a question (or @FILE: an edited document)
  lev respond RUN_ID REQUEST_ID --choice 1      pick an option (counted from 0)
  lev respond RUN_ID REQUEST_ID --decline       turn the request down
"""


def add_msg(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev msg``."""
    msg = subparsers.add_parser(
        "msg", help="send a message to a running agent",
        description="Send a message to a live run; the model sees it as a user turn.",
        epilog=MSG_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    msg.add_argument("run_id", help="a run id (or a unique prefix of one)")
    msg.add_argument("text", help="the message (TEXT, or @FILE to read it)")
    msg.set_defaults(func=cmd_msg)


def add_respond(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev respond``."""
    respond = subparsers.add_parser(
        "respond", help="answer a run that waits for a person",
        description=("List the requests live runs are waiting on, or answer one: a tool approval, a "
                     "question, a choice, a document to review or edit, a checkpoint."),
        epilog=RESPOND_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    respond.add_argument("run_id", nargs="?", help="a run id (or a unique prefix of one)")
    respond.add_argument("request_id", nargs="?", help="the request to answer (lev respond RUN_ID lists them)")
    respond.add_argument("answer", nargs="?", help="the answer: text, yes/no, an option, or @FILE")
    how = respond.add_mutually_exclusive_group()
    how.add_argument("--approve", "--allow", action="store_true", help="allow the tool call (once, unless --stage/--run)")
    how.add_argument("--deny", action="store_true", help="refuse the tool call")
    how.add_argument("--choice", type=int, metavar="N", help="pick option N (counted from 0)")
    how.add_argument("--decline", action="store_true", help="turn the request down without an answer")
    scope = respond.add_mutually_exclusive_group()
    scope.add_argument("--stage", action="store_true", help="with --approve: allow the tool for the rest of this stage")
    scope.add_argument("--run", "--session", action="store_true", help="with --approve: allow the tool for the rest of the run")
    respond.add_argument("--json", action="store_true", help="list open requests as JSON")
    respond.set_defaults(func=cmd_respond)


def _live_store(run_id: str) -> tuple[Any, dict[str, Any]] | str:
    """The store and meta.json of a live run, or the message saying why it is not one."""
    from lev_nb.cli.run_status import status_text
    from lev_nb.store.listing import OWNED_STATUSES, owner_gone
    from lev_nb.store import RunNotFound, find_run

    try:
        store = find_run(run_id)
    except (RunNotFound, ValueError) as exc:
        return str(exc)
    try:
        meta = store.read_meta()
    except (OSError, ValueError) as exc:
        return f"the record of run '{store.run_id}' cannot be read ({exc})"
    if meta.get("status") not in OWNED_STATUSES:
        return f"run '{store.run_id}' is not running (status: {status_text(meta)}); only a live run can take it"
    if owner_gone(meta):
        return (f"run '{store.run_id}' is not running: the process that ran it (pid {meta.get('pid')}) is gone, "
                f"so nothing would read it; continue it with `lev resume {store.run_id}`, which asks its open "
                "requests again")
    return store, meta


def _read_at(value: str, what: str) -> str:
    if value.startswith("@"):
        try:
            return Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {what} from '{value[1:]}': {exc.strerror or exc}") from None
    return value


def cmd_msg(args: argparse.Namespace) -> int:
    """``lev msg RUN_ID TEXT``: leave a message in a live run's inbox."""
    found = _live_store(args.run_id)
    if isinstance(found, str):
        return fail("msg", found)
    store, meta = found
    try:
        text = _read_at(args.text, "the message")
    except ValueError as exc:
        return fail("msg", str(exc))
    if not text.strip():
        return fail("msg", "the message is empty")
    store.post_inbox({"type": "message", "text": text})
    print(f"message sent to run {store.run_id}; the model sees it at the run's next step in a stage that accepts messages")
    return 0


def cmd_respond(args: argparse.Namespace) -> int:
    """``lev respond [RUN_ID [REQUEST_ID [ANSWER]]]``: list open requests, or answer one."""
    from lev_nb.engine.interaction import InteractionError, Request, make_answer

    if args.run_id is None:
        return _list_all(args.json)
    found = _live_store(args.run_id)
    if isinstance(found, str):
        return fail("respond", found)
    store, meta = found
    pending = [Request.from_dict(p) for p in meta.get("pending") or []]
    if args.request_id is None:
        _print_requests(store.run_id, pending, args.json)
        return 0
    request = next((r for r in pending if r.id == args.request_id), None)
    if request is None:
        known = ", ".join(r.id for r in pending) or "none"
        return fail("respond", f"run '{store.run_id}' has no open request '{args.request_id}' (open: {known})")
    scope = "stage" if args.stage else "run" if args.run else None
    if scope and not args.approve:
        return fail("respond", "--stage and --run go with --approve")
    if (args.approve or args.deny) and request.kind != "approval":
        return fail("respond", f"request '{request.id}' is a {request.kind} request, not a tool approval; "
                               "give the answer as text (or --choice N, --decline)")
    if request.kind == "approval" and not (args.approve or args.deny or args.decline or args.answer):
        return fail("respond", f"request '{request.id}' asks whether to allow '{request.tool}': answer with "
                               "--approve (add --stage or --run to allow it for longer) or --deny")
    try:
        answer: Any = _read_at(args.answer, "the answer") if args.answer is not None else None
        if args.approve or args.deny:
            answer = bool(args.approve)
        taken = make_answer(request, answer, choice=args.choice, scope=scope, decline=args.decline, source="inbox")
    except (InteractionError, ValueError) as exc:
        return fail("respond", str(exc))
    store.post_inbox({
        "type": "response", "request_id": request.id, "answer": answer, "choice": args.choice,
        "scope": scope, "decline": args.decline,
    })
    resolved = _wait_taken(store, request)
    if resolved is None:
        print(f"answer left for run {store.run_id}; it takes it at its next check")
        return 0
    mine = taken.summary() or taken.outcome
    theirs = resolved.get("answer") or resolved.get("outcome")
    if resolved and (resolved.get("outcome"), theirs) != (taken.outcome, mine):
        # Two answers raced (another `lev respond`, the terminal, the notebook): the run took the
        # other one and only warned about ours in its record.
        return fail("respond", f"request '{request.id}' of run {store.run_id} was settled by another answer "
                               f"first ({theirs}, from {resolved.get('source') or 'elsewhere'}); yours was not used")
    print(f"answered {request.id} of run {store.run_id}: {mine}")
    return 0


def _wait_taken(store: Any, request: Any) -> dict[str, Any] | None:
    """How the run settled ``request`` (its ``interaction_resolved`` event, in the record of the run
    that asked, a sub-agent's maybe; ``{}`` when the request left the pending list but the event is
    not on disk yet), or None when it is still open after a few seconds."""
    from lev_nb.store import RunNotFound, find_run

    request_id = request.id
    asker = store
    if request.run_id and request.run_id != store.run_id:
        try:
            asker = find_run(request.run_id)
        except (RunNotFound, ValueError):
            pass
    deadline = time.monotonic() + ANSWER_WAIT_S
    left = False
    while time.monotonic() < deadline:
        if not left:
            try:
                meta = store.read_meta()
            except (OSError, ValueError):
                meta = {}
            left = not any(p.get("id") == request_id for p in meta.get("pending") or [])
        if left:
            for event in reversed(asker.read_events()):
                if event.get("type") == "interaction_resolved" and event.get("request_id") == request_id:
                    return event
        time.sleep(0.1)
    return {} if left else None


def _list_all(as_json: bool) -> int:
    from lev_nb.engine.interaction import Request
    from lev_nb.store.listing import scan_runs

    # The scan parses only the records whose peeked status is waiting_input and whose owner lives.
    waiting = [e for e in scan_runs() if e.status == "waiting_input" and e.state == "live"]
    rows = [e.meta for e in waiting if e.meta.get("pending")]
    if as_json:
        print(json.dumps({m["run_id"]: m["pending"] for m in rows}, indent=2))
        return 0
    if not rows:
        print("no run is waiting for an answer")
        return 0
    for meta in rows:
        _print_requests(meta["run_id"], [Request.from_dict(p) for p in meta["pending"]], False)
    return 0


def _print_requests(run_id: str, pending: list[Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps([r.to_dict() for r in pending], indent=2))
        return
    if not pending:
        print(f"run {run_id} is not waiting for an answer")
        return
    for request in pending:
        print(f"{run_id}  {request.id}  [{request.kind}] {request.describe()}")


# ------------------------------------------------------------------------------------------------
# The terminal prompt of `lev run`
# ------------------------------------------------------------------------------------------------
class TerminalPrompter:
    """Asks a run's pending requests at the terminal, one at a time (see the module docstring).

    Call :meth:`step` from the main thread whenever it wakes; it returns at once when nothing is
    pending. Questions go to ``out`` (stderr) with the progress line paused; answers are read from
    ``stdin`` a line at a time, so a Ctrl-C or an answer from elsewhere is noticed within
    ``POLL_S``.
    """

    POLL_S = 0.2

    def __init__(self, run: Any, stdin: TextIO, out: TextIO, progress: Any = None) -> None:
        self.run = run
        self.stdin = stdin
        self.out = out
        self.progress = progress
        self.done: set[str] = set()

    def step(self) -> None:
        """Ask every request that is pending now."""
        for request in self.run.pending:
            if request.id in self.done:
                continue
            self.done.add(request.id)
            if self.progress is not None:
                self.progress.pause()
            try:
                self._ask(request)
            finally:
                if self.progress is not None:
                    self.progress.resume()

    # -- one request ------------------------------------------------------------------------------
    def _say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _ask(self, request: Any) -> None:
        from lev_nb.engine.interaction import InteractionError

        self._say()
        self._show(request)
        while True:
            line = self._line(self._question(request), request)
            if line is None:
                return
            if line is EOF:  # Ctrl-D: no answer from this terminal
                self._say("\n  (declined)")
                try:
                    self.run.respond(request.id, decline=True, source="terminal")
                except ValueError:
                    pass
                return
            try:
                answer = self._answer(request, line)
                if answer is None:
                    continue
                self.run.respond(request.id, answer[0], source="terminal", **answer[1])
                return
            except ValueError as exc:  # InteractionError too: one line, then ask again
                if isinstance(exc, InteractionError) and "no open request" in str(exc):
                    self._say("  (already answered)")
                    return
                self._say(f"  {exc}")

    def _show(self, request: Any) -> None:
        kind = request.kind
        where = f"[{request.stage}] " if request.stage else ""
        if kind == "approval":
            self._say(f"lev run: {where}the agent wants to run '{request.tool}'")
            from lev_nb.engine.interaction import is_taint_gate

            if is_taint_gate(request):
                self._say(f"  {request.prompt}")
            for key, value in (request.arguments or {}).items():
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text = clip_shown(text, ARG_CHARS)
                self._say(f"  {key}: " + text.replace("\n", "\n    "))
            return
        if kind == "checkpoint":
            self._say(f"lev run: {where}checkpoint '{request.point}': {request.prompt}")
        elif kind == "review":
            self._say(f"lev run: {where}please review: {request.title or request.prompt}")
        else:
            self._say(f"lev run: {where}the agent asks: {request.prompt}")
        if request.document:
            self._say("  ---")
            for line in request.document.splitlines():
                self._say(f"  {line}")
            self._say("  ---")
        if kind in ("choice", "checkpoint"):
            for i, option in enumerate(request.options, 1):
                self._say(f"  {i}) {option}")

    @staticmethod
    def _question(request: Any) -> str:
        kind = request.kind
        if kind == "approval":
            return "Allow it? [y] once, [s] for this stage, [r] for this run, [n] no: "
        if kind == "confirm":
            return "[y/n]: "
        if kind == "choice":
            return f"Pick 1-{len(request.options)}: "
        if kind == "checkpoint":
            return ("Pick a number or type your answer: " if request.options else "Your answer (Enter approves): ")
        if kind == "review":
            return "Enter to acknowledge, or type feedback: "
        if kind == "edit":
            return "Enter keeps it; @FILE takes the new text from a file; or type the new text, then a line with only '.': "
        return "Your answer (Enter: no answer): "

    def _answer(self, request: Any, line: str) -> tuple[Any, dict[str, Any]] | None:
        """(answer, keyword arguments) for ``run.respond``, or None to ask again."""
        kind, text = request.kind, line.strip()
        if kind == "approval":
            scopes = {"y": "once", "yes": "once", "s": "stage", "r": "run"}
            if text.lower() in scopes:
                return True, {"scope": scopes[text.lower()]}
            if text.lower() in ("n", "no"):
                return False, {}
            self._say("  answer y, s, r or n")
            return None
        if kind in ("choice", "checkpoint") and text.isdigit() and request.options:
            number = int(text)
            if not 1 <= number <= len(request.options):
                self._say(f"  pick a number from 1 to {len(request.options)}")
                return None
            return None, {"choice": number - 1}
        if kind == "checkpoint" and not text and request.options:
            return None
        if kind == "edit":
            if not text:
                return None, {}
            if text.startswith("@"):
                return _read_at(text, "the document"), {}
            lines = [line.rstrip("\n")]
            while True:
                more = self._line("", request)
                if more is None or more is EOF or more.rstrip("\n") == ".":
                    break
                lines.append(more.rstrip("\n"))
            return "\n".join(lines), {}
        if kind == "confirm":
            return text, {}
        return (text or None), {}

    def _answered_elsewhere(self, request_id: str) -> bool:
        """Whether the request was answered (not cancelled with the run)."""
        return any(
            e.kind == "interaction_resolved" and e.request_id == request_id and e.outcome != "cancelled"
            for e in self.run.events.snapshot()
        )

    def _line(self, question: str, request: Any) -> str | None:
        """One line from stdin; None when the request was settled elsewhere or the run ended,
        :data:`EOF` at the end of input (Ctrl-D)."""
        if question:
            self.out.write(question)
            self.out.flush()
        while True:
            if request.id not in {r.id for r in self.run.pending}:
                self._say("\n  (answered elsewhere)" if self._answered_elsewhere(request.id) else "")
                return None
            try:
                ready, _, _ = select.select([self.stdin], [], [], self.POLL_S)
            except (OSError, ValueError):  # stdin closed
                return None
            if ready:
                line = self.stdin.readline()
                return line if line else EOF
