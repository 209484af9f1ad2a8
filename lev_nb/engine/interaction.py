"""A person in the loop (docs/security.md#permissions, docs/runs.md#a-person-in-the-loop): the requests a
person must
answer, their answers, the approval grants, and messages for the model.

One mechanism serves every "a person must answer": a tool call whose policy is ``ask``, the
blocking tools (``ask_user_text``, ``ask_user_choice``, ``ask_user_confirm``,
``present_for_review``, ``edit_document``) and the checkpoints of ``interactive_points`` stages
each become a :class:`Request` held by the run's :class:`InteractionHub`. While one is open the
run's status is ``waiting_input``; the request shows as ``run.pending``, in meta.json (``pending``
and ``waiting_on``) and as an ``interaction_requested`` event. ``run.respond`` (from any thread),
the notebook form, the terminal prompt of ``lev run`` and ``lev respond`` from another process
(through the run's inbox) answer it, and an ``interaction_resolved`` event says how it ended. The
``[limits] interaction_timeout_secs`` setting bounds the wait (0: forever); then the spec's
neutral answer applies (an approval is denied, a question gets no answer).

Whether anybody can answer is decided at launch (``interactive``): ``lev run`` at a terminal
(stdin is a tty) asks; ``interactive=True`` in Python asks (answer with ``run.respond``);
``interactive=False`` never asks; the Python default (None) asks when the run is started in a
notebook kernel (from its start, so the first request already offers the question tools; its view,
``%%lev`` and ``run.wait()`` show the forms), and elsewhere from the moment a run view is open. A run with
nobody to ask never waits: an ``ask`` tool is denied with the message that says how to
allow it, a blocking tool gets no answer, an ``ask`` checkpoint ends the run. A child run hands
its requests to its root run's hub, so whoever watches the root answers them.

Messages (``run.send``, ``lev msg``) are queued and reach the model as a user turn at the run's
next step in a stage that ``accepts_messages``; until then they wait.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import field
from typing import TYPE_CHECKING, Any, Callable

from lev_nb.engine import events as ev
from lev_nb.errors import UsageError
from lev_nb.messages import ToolCall
from lev_nb.records import record
from lev_nb.tools.policy import (
    approval_keys,
    declined_text,
    nameless_write_text,
    needs_approval_text,
    shell_line,
)

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState

__all__ = [
    "KINDS", "SCOPES", "Answer", "InteractionError", "InteractionHub", "Request",
    "is_taint_gate", "make_answer", "fold_label", "match_option",
]

KINDS = ("approval", "text", "choice", "confirm", "review", "edit", "checkpoint")
SCOPES = ("once", "stage", "run")
# meta.json's waiting_on.reason for each kind of request (docs/runs.md#the-run-record).
WAIT_REASONS = {"approval": "tool_approval", "checkpoint": "interaction_point"}
POLL_S = 0.5  # how often a waiting run looks at its inbox
TAINT_REQUEST_PREFIX = "taint"  # the taint gate's approval requests are taint-<call id>
PARENT_MESSAGE_PREFIX = "Message from the agent that started you:\n"
NO_ANSWER = "User provided no answer."
DECLINED = "User declined to answer."

_ALLOW_WORDS = {"allow", "yes", "y", "once", "approve", "approved", "ok", "true"}
_DENY_WORDS = {"deny", "no", "n", "decline", "declined", "false"}
_YES_WORDS = {"yes", "y", "true", "ok", "confirm"}
_NO_WORDS = {"no", "n", "false"}


class InteractionError(UsageError):
    """An answer or a message that cannot be taken: no such open request, an answer that does
    not fit the request, or a run that has ended."""


@record
class Request:
    """One question to a person.

    ``kind`` is approval | text | choice | confirm | review | edit | checkpoint. An approval names
    the ``tool`` and its ``arguments``; a choice and a checkpoint offer ``options``; review and
    edit carry the ``document`` (review also a ``title``); a checkpoint names its ``point``, shows
    the stage's answer as ``document`` and says what each option does in ``roles``. ``created`` is a Unix time.
    """

    id: str
    kind: str
    stage: str
    created: float = field(default_factory=time.time)
    prompt: str = ""
    options: tuple[str, ...] = ()
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    document: str | None = None
    title: str | None = None
    point: str | None = None
    run_id: str = ""
    # A checkpoint's options, what each does: approve | revise (back to the stage with its note)
    # | edit | end (the run stops); the form says so on its buttons.
    roles: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON-ready data (meta.json's ``pending`` holds these)."""
        return {
            "id": self.id, "kind": self.kind, "run_id": self.run_id, "stage": self.stage,
            "created": self.created, "prompt": self.prompt, "options": list(self.options),
            "tool": self.tool, "arguments": self.arguments, "document": self.document,
            "title": self.title, "point": self.point, **({"roles": list(self.roles)} if self.roles else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Request:
        """A request read back from meta.json (``lev respond`` checks answers against it)."""
        return cls(
            id=str(data.get("id", "")), kind=str(data.get("kind", "text")), stage=str(data.get("stage", "")),
            created=float(data.get("created") or 0.0), prompt=str(data.get("prompt") or ""),
            options=tuple(str(o) for o in data.get("options") or ()), tool=data.get("tool"),
            arguments=data.get("arguments"), document=data.get("document"), title=data.get("title"),
            point=data.get("point"), run_id=str(data.get("run_id") or ""),
            roles=tuple(str(r) for r in data.get("roles") or ()),
        )

    def describe(self) -> str:
        """One line saying what is asked."""
        if self.kind == "approval":
            if self.id.startswith(TAINT_REQUEST_PREFIX + "-"):
                return f"allow the tool '{self.tool}' past the taint gate?"
            return f"allow the tool '{self.tool}'?"
        if self.kind == "checkpoint":
            return f"checkpoint '{self.point}': {self.prompt}".rstrip(": ")
        if self.kind == "review":
            return f"review: {self.title or self.prompt}"
        return self.prompt or self.kind


@record
class Answer:
    """How a request ended: ``outcome`` answered | declined | timed_out | cancelled.

    ``value`` is the text, the chosen option's label, the feedback or the edited document;
    ``approved`` and ``scope`` (once | stage | run) answer an approval; ``choice`` is the index of
    the option picked, when one was; ``source`` says who answered.
    """

    request_id: str
    outcome: str
    value: str | None = None
    approved: bool | None = None
    scope: str = "once"
    choice: int | None = None
    source: str = "python"

    def summary(self) -> str:
        """A short form for the record."""
        if self.approved is not None:
            return f"allow ({self.scope})" if self.approved else "deny"
        text = " ".join((self.value or "").split())
        return text[:200]


def fold_label(text: str) -> str:
    """``text`` compared loosely: unicode dashes folded to '-', whitespace collapsed, case folded."""
    for dash in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212":
        text = text.replace(dash, "-")
    return " ".join(text.split()).casefold()


def match_option(options: tuple[str, ...], text: str) -> int | None:
    """The index of the option ``text`` names: exactly, then loosely (:func:`fold_label`)."""
    if text in options:
        return options.index(text)
    folded = fold_label(text)
    for i, option in enumerate(options):
        if fold_label(option) == folded:
            return i
    return None


def make_answer(
    request: Request,
    answer: Any = None,
    *,
    choice: int | None = None,
    scope: str | None = None,
    decline: bool = False,
    source: str = "python",
) -> Answer:
    """Check an answer against ``request`` and return it as an :class:`Answer`.

    - approval: ``answer`` True/False or "allow"/"deny" (also "stage" and "run"), ``scope``
      once | stage | run (a scope alone means allow);
    - text, review, edit: a string (None: no answer, acknowledged, unchanged);
    - choice: ``choice`` (0-based index) or ``answer`` naming an option;
    - confirm: True/False or "yes"/"no";
    - checkpoint: ``choice`` or the option's label, or free text;
    - ``decline=True`` turns any request down.

    Raises :class:`InteractionError` saying what would fit instead.
    """
    rid = request.id
    if scope is not None and scope not in SCOPES:
        raise InteractionError(f"scope must be one of {', '.join(SCOPES)}, not '{scope}'")
    if decline:
        return Answer(rid, "declined", approved=False if request.kind == "approval" else None, source=source)
    kind = request.kind
    if kind == "approval":
        return _approval(request, answer, scope, source)
    if scope is not None:
        raise InteractionError(f"request '{rid}' is a {kind} request; only approvals take a scope")
    if choice is None and isinstance(answer, int) and not isinstance(answer, bool) and request.options:
        choice = answer
    if choice is not None:
        if not request.options:
            raise InteractionError(f"request '{rid}' offers no options to choose from; answer it with text")
        if not isinstance(choice, int) or isinstance(choice, bool) or not 0 <= choice < len(request.options):
            raise InteractionError(
                f"choice {choice!r} is out of range for request '{rid}': pick 0-{len(request.options) - 1} "
                f"({_numbered(request.options)})"
            )
        return Answer(rid, "answered", value=request.options[choice], choice=choice, source=source)
    if kind == "confirm":
        if isinstance(answer, bool):
            return Answer(rid, "answered", value="Yes" if answer else "No", source=source)
        word = str(answer).strip().lower() if isinstance(answer, str) else None
        if word in _YES_WORDS or word in _NO_WORDS:
            return Answer(rid, "answered", value="Yes" if word in _YES_WORDS else "No", source=source)
        raise InteractionError(f"request '{rid}' asks for yes or no, not {answer!r}")
    if kind == "checkpoint" and isinstance(answer, bool):
        answer = "Yes" if answer else "No"  # a confirm-style checkpoint
    if answer is not None and not isinstance(answer, str):
        raise InteractionError(f"request '{rid}' takes text as its answer, not {type(answer).__name__}")
    if kind == "choice":
        index = match_option(request.options, answer) if answer is not None else None
        if index is None:
            raise InteractionError(
                f"request '{rid}' asks to pick one of: {_numbered(request.options)}; give the option "
                "or its number (choice=N, counted from 0)"
            )
        return Answer(rid, "answered", value=request.options[index], choice=index, source=source)
    if kind == "checkpoint" and answer is not None:
        index = match_option(request.options, answer)
        if index is not None:
            return Answer(rid, "answered", value=request.options[index], choice=index, source=source)
    return Answer(rid, "answered", value=answer, source=source)


def _approval(request: Request, answer: Any, scope: str | None, source: str) -> Answer:
    rid = request.id
    approved: bool | None = None
    if answer is None:
        approved = True if scope is not None else None
    elif isinstance(answer, bool):
        approved = answer
    elif isinstance(answer, str):
        word = answer.strip().lower().replace("allow_", "").replace("allow ", "").replace("for this ", "")
        if word in ("stage", "run"):
            approved, scope = True, scope or word
        elif word in _ALLOW_WORDS:
            approved = True
        elif word in _DENY_WORDS:
            approved = False
    if approved is None:
        raise InteractionError(
            f"request '{rid}' asks whether to allow '{request.tool}': answer allow or deny "
            "(with scope once, stage or run)"
        )
    return Answer(rid, "answered" if approved else "declined", approved=approved,
                  scope=(scope or "once") if approved else "once", source=source)


def _numbered(options: tuple[str, ...]) -> str:
    return ", ".join(f"{i}: {o}" for i, o in enumerate(options))


class InteractionHub:
    """One run's open requests, grants and queued messages; see the module docstring.

    Created by the runner with the run state, ``interactive`` (somebody may answer) and, for a
    child run, its ``parent`` hub (requests are held by the root run's hub). The engine-side
    methods (:meth:`ask`, :meth:`approve`, :meth:`blocking_tool`, :meth:`deliver_messages`,
    :meth:`poll_inbox`) run on the engine loop; :meth:`respond`, :meth:`send` and :meth:`pending`
    may be called from any thread.
    """

    def __init__(self, state: RunState, *, interactive: bool | None, parent: InteractionHub | None = None) -> None:
        self.state = state
        self.mode = interactive  # True: ask; False: never ask; None: ask while somebody attends
        self.attended = False
        self.parent = parent
        seconds = state.settings.limits.interaction_timeout_secs
        self.timeout: float | None = float(seconds) if seconds else None
        self._lock = threading.Lock()
        self._open: dict[str, tuple[Request, asyncio.Future[Answer], InteractionHub]] = {}
        self._ids: set[str] = set()
        self._run_grants: set[str] = set()
        self._stage_grants: set[tuple[str, int, str]] = set()
        self._messages: list[tuple[str, str, str | None]] = []  # (text, source, region), waiting for a stage that accepts
        self._inbox_stamp: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # What a `cancel` left in the inbox does (`lev cancel` from another process): the runner
        # sets it; it gets who asked.
        self.on_cancel: Callable[[str], None] | None = None
        # A resumed run: the requests that were open when its process stopped, and answers to
        # them that arrived (lev respond) before the resumed run asked again.
        self._expected: set[str] = set()
        self._parked: dict[str, dict[str, Any]] = {}
        if state.journal is not None:
            for grant in state.journal.grants():  # ["run", key...] / ["stage", stage, visit, key...]
                if grant[:1] == ["run"]:
                    self._run_grants.update(str(key) for key in grant[1:])
                elif grant[:1] == ["stage"] and len(grant) >= 4:
                    self._stage_grants.update((str(grant[1]), int(grant[2]), str(key)) for key in grant[3:])

    def expect(self, request_ids: list[str]) -> None:
        """A resumed run asks these requests again: an answer to one of them that arrives first
        (lev respond, while no process ran the run) is kept until it is asked."""
        self.root._expected.update(request_ids)

    @property
    def interactive(self) -> bool:
        """Whether a request would reach somebody now (a child run asks whoever its root asks)."""
        if self.parent is not None:
            return self.parent.interactive
        return self.mode is True or (self.mode is None and self.attended)

    def attend(self) -> None:
        """Somebody watches the run and can answer (a notebook run view): a run launched with
        ``interactive=None`` asks from now on. Safe from any thread."""
        self.root.attended = True

    @property
    def root(self) -> InteractionHub:
        """The hub that holds this run's requests (the root run's)."""
        hub = self
        while hub.parent is not None:
            hub = hub.parent
        return hub

    # -- any thread ----------------------------------------------------------------------------
    def pending(self) -> list[Request]:
        """The open requests of this run (for a root run, its children's too), oldest first."""
        return [request for request, _, owner in self._all_open() if self.parent is None or owner is self]

    def respond(self, request_id: str, answer: Any = None, *, choice: int | None = None,
                scope: str | None = None, decline: bool = False, source: str = "python") -> Answer:
        """Answer the open request ``request_id`` (see :func:`make_answer`); safe from any thread.

        The answer is checked here, so a bad one raises :class:`InteractionError` at once; the
        run takes it on its engine loop. An answer to a request settled in the meantime is ignored.
        """
        root = self.root
        with root._lock:
            entry = root._open.get(request_id)
            open_ids = list(root._open)
        if entry is None:
            known = f"open requests: {', '.join(open_ids)}" if open_ids else "nothing is waiting for an answer"
            raise InteractionError(f"no open request '{request_id}' in run '{self.state.run_id}' ({known})")
        request, future, _ = entry
        result = make_answer(request, answer, choice=choice, scope=scope, decline=decline, source=source)
        loop = root._loop
        if loop is None or loop.is_closed():
            raise InteractionError(f"run '{self.state.run_id}' is no longer running")
        with root._lock:
            if root._open.pop(request_id, None) is None:
                raise InteractionError(f"request '{request_id}' was answered in the meantime")
        loop.call_soon_threadsafe(_settle, future, result)
        return result

    def send(self, text: str, source: str = "python", region: str | None = None) -> None:
        """Queue ``text`` for the model; it arrives as a user turn at the run's next step in a stage
        that accepts messages (or in ``region``, when the stage shows it: ``send_to_agent``'s
        target_region). Safe from any thread."""
        from lev_nb.engine.loop import engine_loop

        if not isinstance(text, str) or not text.strip():
            raise InteractionError("a message needs some text")
        if self.state.meta.finished:
            raise InteractionError(
                f"run '{self.state.run_id}' has ended ({self.state.meta.status}); nothing will read the message"
            )
        engine_loop().call_soon(self._queue_message, text, source, region)

    # -- the engine loop ------------------------------------------------------------------------
    def _queue_message(self, text: str, source: str, region: str | None = None) -> None:
        self._messages.append((text, source, region))
        state = self.state
        if not state.stage.accepts_messages:
            state.rec.emit(ev.MessageSent(state.run_id, state.stage.name, text=text, status="queued", source=source))

    def deliver_messages(self) -> int:
        """Put queued messages into the conversation (or the region a message names, when the
        stage shows it) if the current stage accepts them, reading the inbox first; returns how
        many were delivered."""
        self.poll_inbox()
        state = self.state
        if not self._messages or not state.stage.accepts_messages:
            return 0
        delivered, self._messages = self._messages, []
        for text, source, region in delivered:
            body = PARENT_MESSAGE_PREFIX + text if source == "parent" else text
            if region and region != "conversation" and state.ctx.is_visible(region) and state.ctx.note(region, body):
                pass  # the message sits in the region the sender named
            else:
                state.ctx.add_user(body)
            state.rec.emit(ev.MessageSent(state.run_id, state.stage.name, text=text, status="delivered", source=source))
        return len(delivered)

    def close(self) -> None:
        """The run is ending: say so about messages that never reached the model."""
        self.poll_inbox()
        if self._messages:
            count = len(self._messages)
            self.state.warn(
                f"{count} message{'s' if count != 1 else ''} never reached the model: the run ended "
                "before a stage that accepts messages",
                "message-undelivered",
            )
            self._messages = []

    def poll_inbox(self) -> None:
        """Take what other processes left in the run's inbox (``lev msg``, ``lev respond``):
        cheap when nothing arrived (one stat of the folder)."""
        self.poll_inbox_stamped(self.state.store.inbox_stamp())

    def poll_inbox_stamped(self, stamp: int | None) -> None:
        """:meth:`poll_inbox`, given the inbox folder's stamp (taken for many runs at once)."""
        store = self.state.store
        if stamp is None or stamp == self._inbox_stamp:
            return
        entries = store.take_inbox()
        # Something taken: look again next time, in case more arrived within the same clock tick.
        self._inbox_stamp = None if entries else stamp
        for entry in entries:
            self._take_entry(entry)

    def _take_entry(self, entry: dict[str, Any]) -> None:
        state = self.state
        kind = entry.get("type")
        if kind == "message" and isinstance(entry.get("text"), str):
            self._queue_message(entry["text"], "inbox")
            return
        if kind == "response" and isinstance(entry.get("request_id"), str):
            root = self.root
            with root._lock:
                early = entry["request_id"] in root._expected and entry["request_id"] not in root._open
            if early:
                root._parked[entry["request_id"]] = entry
                return
            try:
                self.root.respond(
                    entry["request_id"], entry.get("answer"), choice=entry.get("choice"),
                    scope=entry.get("scope"), decline=bool(entry.get("decline")), source="inbox",
                )
            except InteractionError as exc:
                state.warn(f"an answer left in the run's inbox was not taken: {exc}", "inbox-unreadable")
            return
        if kind == "cancel" and self.on_cancel is not None:
            self.on_cancel(str(entry.get("by") or "another process"))
            return
        if kind == "unreadable":
            where = (f"set aside as inbox/{entry['set_aside']}" if entry.get("set_aside")
                     else "left in place and no longer read")
            state.warn(f"the run's inbox held an entry it cannot read, inbox/{entry.get('file')}: "
                       f"{entry.get('reason')}; it was {where} (rejected)", "inbox-unreadable")
            return
        state.warn(f"the run's inbox held something it cannot read: {entry}", "inbox-unreadable")

    def new_id(self, prefix: str, key: str) -> str:
        """A request id unique in the run's tree: ``<prefix>-<key>`` (``-2``, ``-3`` ... if taken,
        say by a sibling worker whose model numbers its calls the same way)."""
        root = self.root
        base = f"{prefix}-{key}"
        rid, n = base, 1
        with root._lock:
            while rid in root._ids:
                n += 1
                rid = f"{base}-{n}"
            root._ids.add(rid)
        return rid

    def request(self, kind: str, prefix: str, key: str, **fields: Any) -> Request:
        """A new request of this run, in its current stage."""
        state = self.state
        return Request(id=self.new_id(prefix, key), kind=kind, stage=state.stage.name, run_id=state.run_id, **fields)

    async def ask(self, request: Request, grant: Any = None) -> Answer:
        """Hold ``request`` open until it is answered, times out, or the run is cancelled.

        The answer is journaled before the run acts on it, and a resumed run takes it from its
        journal instead of asking again (``grant`` computes the approval grant to journal with it).
        """
        journal = self.state.journal
        replayed = self.replayed(request)
        if replayed is not None:
            return replayed
        root = self.root
        answer = await root._hold(request, self)
        if journal is not None and answer.outcome != "cancelled":
            journal.record_answer(request.id, dict(answer.__dict__), grant(answer) if grant is not None else None)
        return answer

    async def _hold(self, request: Request, owner: InteractionHub) -> Answer:
        loop = asyncio.get_running_loop()
        self._loop = loop
        future: asyncio.Future[Answer] = loop.create_future()
        with self._lock:
            self._open[request.id] = (request, future, owner)
            parked = self._parked.pop(request.id, None)
        if parked is not None:  # answered while no process ran the run
            self._take_entry(parked)
        owner._publish()
        if owner is not self:
            self._publish()
        owner.state.rec.emit(ev.InteractionRequested(
            owner.state.run_id, request.stage, request_id=request.id, request_kind=request.kind,
            prompt=request.describe(), request=request.to_dict(),
        ))
        deadline = loop.time() + self.timeout if self.timeout else None
        answer = Answer(request.id, "cancelled", source="cancel")
        try:
            while not future.done():
                wait = POLL_S if deadline is None else min(POLL_S, deadline - loop.time())
                if wait <= 0:
                    future.set_result(Answer(request.id, "timed_out", source="timeout"))
                    break
                await asyncio.wait({future}, timeout=wait)
                if not future.done():
                    self.poll_inbox()
                    if owner is not self:
                        owner.poll_inbox()
            answer = future.result()
        finally:
            with self._lock:
                self._open.pop(request.id, None)
            owner._publish()
            if owner is not self:
                self._publish()
            owner.state.rec.emit(ev.InteractionResolved(
                owner.state.run_id, request.stage, request_id=request.id, outcome=answer.outcome,
                answer=answer.summary(), source=answer.source,
            ))
        return answer

    def replayed(self, request: Request) -> Answer | None:
        """The journaled answer to ``request`` while a resumed run replays (whoever can answer
        now: the person answered then), else None."""
        journal = self.state.journal
        data = journal.replay_answer(request.id) if journal is not None else None
        if data is None:
            return None
        fields = {k: v for k, v in data.items() if k in Answer.__dataclass_fields__}
        return Answer(**{"request_id": request.id, "outcome": "answered", **fields})

    def _publish(self) -> None:
        """Write the run's open requests (and its waiting status) into its record."""
        state, meta = self.state, self.state.meta
        mine = self.pending()
        meta.pending = [r.to_dict() for r in mine]
        if mine:
            reasons = [WAIT_REASONS.get(r.kind, "user_prompt") for r in mine]
            reason = next((r for r in ("interaction_point", "tool_approval", "user_prompt") if r in reasons), reasons[0])
            meta.waiting_on = {"reason": reason, "requests": [r.id for r in mine]}
            if meta.status == "running":
                meta.status = "waiting_input"
        else:
            meta.waiting_on = None
            if meta.status == "waiting_input":
                meta.status = "running"
        state.rec.save(force=True)

    def _all_open(self) -> list[tuple[Request, asyncio.Future[Answer], InteractionHub]]:
        root = self.root
        with root._lock:
            return list(root._open.values())

    # -- approvals ------------------------------------------------------------------------------
    def _stage_key(self, key: str) -> tuple[str, int, str]:
        stage = self.state.stage.name
        return (stage, self.state.visits.get(stage, 0), key)

    def covers(self, key: str) -> bool:
        """Whether an approval for this run, or for the current stage, granted ``key`` (a tool's
        name, or one thing a shell line runs or writes: lev_nb.tools.policy.approval_keys)."""
        return key in self._run_grants or self._stage_key(key) in self._stage_grants

    async def approve(self, call: ToolCall) -> bool | str:
        """The approver of an ``ask`` tool: a grant already given, else a person's answer (True),
        else the ``[denied]`` text to return instead of running the call.

        A grant is keyed on what the call runs: approving ``ls && git status`` for the run grants
        ``ls`` and ``git status``, not the shell; a line with nothing reusable grants nothing."""
        keys = approval_keys(call.name, call.arguments)
        if keys and all(self.covers(key) for key in keys):
            return True
        request = self.request(
            "approval", "approve", call.id, prompt=_approval_prompt(call, keys),
            tool=call.name, arguments=dict(call.arguments or {}),
        )
        answer = self.replayed(request)
        if answer is None:
            if not self.interactive:
                line = shell_line(call.name, call.arguments)
                if line is not None and any(write.target is None for write in line.writes):
                    return nameless_write_text(call.name)
                return needs_approval_text(call.name, call.arguments)
            answer = await self.ask(request, grant=lambda a: self._grant_of(keys, a))
        if answer.outcome == "timed_out":
            return (f"[denied] Nobody answered the request to run '{call.name}' within "
                    f"{self.timeout:g} s, so it did not run.")
        if not answer.approved:
            return declined_text(call.name)
        if answer.scope == "run":
            self._run_grants.update(keys)
        elif answer.scope == "stage":
            self._stage_grants.update(self._stage_key(key) for key in keys)
        return True

    async def taint_approve(self, call: ToolCall, tool: str, why: str) -> bool | str:
        """The taint gate's question, asked like any approval (``why``: what it would send where).

        Allowing it for the run (or the stage) raises ``tool``'s clearance for the rest of the run
        (or of the stage visit); once lets this call through. With nobody to ask, the call is
        refused and the person is told (a ``taint-gate-denied`` warning)."""
        key = f"taint:{tool}"
        if self.covers(key):
            return True
        request = self.request(
            "approval", TAINT_REQUEST_PREFIX, call.id, tool=call.name, arguments=dict(call.arguments or {}),
            prompt=(f"Taint gate: {why}. Allow it once, for this stage or for this run (which clears "
                    f"'{tool}' for data of any sensitivity), or deny it."),
        )
        answer = self.replayed(request)
        if answer is None:
            if not self.interactive:
                self.state.warn(f"the taint gate blocked a call: {why}; nobody could be asked, so it did not run "
                                f"(add a rule with `lev policy add {tool} ...` to allow such calls)", "taint-gate-denied")
                return (f"[blocked] {why}. Nobody could be asked to allow it, so it did not run. "
                        f"A rule added with `lev policy add {tool}` can permit it.")
            answer = await self.ask(request, grant=lambda a: self._grant_of([key], a))
        if answer.outcome == "timed_out":
            self.state.warn(f"the taint gate blocked a call: {why}; nobody answered within {self.timeout:g} s",
                            "taint-gate-denied")
            return f"[blocked] {why}. Nobody answered the request to allow it, so it did not run."
        if not answer.approved:
            return f"[blocked] {why}. Denied by the user."
        if answer.scope == "run":
            self._run_grants.add(key)
        elif answer.scope == "stage":
            self._stage_grants.add(self._stage_key(key))
        return True

    def _grant_of(self, keys: list[str], answer: Answer) -> list[Any] | None:
        """The grant an approval's answer gives, as the journal keeps it."""
        if not answer.approved or answer.scope == "once" or not keys:
            return None
        if answer.scope == "run":
            return ["run", *keys]
        return ["stage", *self._stage_key("")[:2], *keys]

    # -- the blocking tools -----------------------------------------------------------------------
    async def blocking_tool(self, call: ToolCall) -> str:
        """Answer one call of a blocking tool (docs/concepts.md#tools) by asking a person."""
        tool = call.name.lower()
        args = call.arguments or {}
        prompt = str(args.get("prompt") or "")
        if tool == "ask_user_text":
            request = self.request("text", "ask", call.id, prompt=prompt)
        elif tool == "ask_user_choice":
            options = tuple(str(o) for o in args.get("options") or ())
            if len(options) < 2:
                return "[error] ask_user_choice requires at least 2 options"
            request = self.request("choice", "ask", call.id, prompt=prompt, options=options)
        elif tool == "ask_user_confirm":
            request = self.request("confirm", "ask", call.id, prompt=prompt, options=("Yes", "No"))
        elif tool == "present_for_review":
            request = self.request(
                "review", "review", call.id, prompt=str(args.get("title") or "Review this document"),
                title=str(args.get("title") or ""), document=str(args.get("markdown") or ""),
            )
        elif tool == "edit_document":
            request = self.request(
                "edit", "edit", call.id, prompt=prompt or "Edit this document", document=str(args.get("content") or ""),
            )
        else:
            return f"[error] {call.name}: not a tool that asks a person"
        answer = self.replayed(request)
        if answer is None:
            if not self.interactive:
                self.state.warn(f"'{call.name}' asked a person, and this run has nobody to ask: it got no answer",
                               "question-unanswered")
                return self._no_answer(request)
            answer = await self.ask(request)
        if answer.outcome == "declined":
            return DECLINED
        if answer.outcome != "answered":
            return self._no_answer(request)
        value = answer.value
        if request.kind == "text":
            return value if value and value.strip() else NO_ANSWER
        if request.kind == "choice":
            return f"User chose: {value}"
        if request.kind == "confirm":
            return f"User answered: {value}"
        if request.kind == "review":
            return f"User feedback: {value}" if value and value.strip() else "User reviewed the document and acknowledged."
        return self._edited(request.document or "", value)

    @staticmethod
    def _edited(document: str, value: str | None) -> str:
        if value is None or value == document:
            return f"User made no changes. Current document:\n{document}"
        return f"User-edited document:\n{value}"

    def _no_answer(self, request: Request) -> str:
        """What a blocking tool returns when nobody answered (timeout, nobody to ask)."""
        if request.kind == "edit":
            return self._edited(request.document or "", None)
        return NO_ANSWER


def is_taint_gate(request: Request) -> bool:
    """Whether an approval request is the taint gate's (its prompt says what data would go where)."""
    return request.kind == "approval" and request.id.startswith(TAINT_REQUEST_PREFIX + "-")


def _approval_prompt(call: ToolCall, keys: list[str]) -> str:
    """The question of an approval, naming what approving it for the stage or run would grant."""
    command = (call.arguments or {}).get("command")
    what = f"'{call.name}': {command}" if isinstance(command, str) else f"'{call.name}'"
    if not keys:
        return (f"The agent wants to run {what}. This line cannot be read as a plain list of commands "
                "(or writes to a target with no fixed path), so an approval covers this one call only.")
    names = ", ".join(key.removeprefix("shell:") for key in keys)
    return f"The agent wants to run {what}. Allowing it for the stage or run grants: {names}."


def _settle(future: asyncio.Future[Answer], answer: Answer) -> None:
    """On the engine loop: the first answer to arrive settles the request."""
    if not future.done():
        future.set_result(answer)
