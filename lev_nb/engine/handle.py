"""``Run``: the handle a user holds while a blueprint runs on the engine thread: its live state,
its events, its result and artifacts, waiting and cancelling (docs/concepts.md#final-outputs; streaming
in notebooks as docs/notebook.md#the-run-view describes)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from lev_nb.engine import views
from lev_nb.engine.eventlog import EventLog
from lev_nb.engine.events import Event
from lev_nb.errors import CleanError

if TYPE_CHECKING:
    from lev_nb.engine.runner import Runner

ARTIFACT_WINDOW = 1024 * 1024
# The statuses of a run that is still on its way to a result, as a sentence says them.
LIVE_STATUSES = {"starting": "starting", "running": "running", "waiting_input": "waiting for an answer"}
PENDING_POLL_S = 0.02  # how often next_request looks for a request


class RunNotFinished(CleanError, RuntimeError):
    """``run.result`` asked of a run that is still going (it has no result yet)."""


class Run:
    """A running (or finished) blueprint.

    ``bp.run(...)`` returns one at once; the run proceeds on lev_nb's engine thread. Block with
    ``run.wait()``, or ``await run`` from async code; follow along with ``for ev in run.events``
    (or ``async for``); stop it with ``run.cancel()``.
    """

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._future: concurrent.futures.Future[None] | None = None

    def start(self) -> None:
        """Schedule the run on the engine thread (``start_run`` calls it once)."""
        from lev_nb.engine.loop import engine_loop

        self._future = engine_loop().submit(self._runner.main())

    def track(self, future: concurrent.futures.Future[None]) -> None:
        """Follow a run its parent run started (a sub-agent or a fan-out worker): ``future``
        completes when it ends, for :meth:`wait`, :meth:`done` and ``await``."""
        self._future = future

    # -- identity and live state ---------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The run's id, also the name of its folder under ``$LEV_HOME/runs``."""
        return self._runner.run_id

    @property
    def status(self) -> str:
        """One of starting, running, waiting_input (a person must answer: ``run.pending``), paused
        (a person must set something up: :attr:`pause_reason` says what, and
        ``lev_nb.resume(run.run_id)`` continues it), complete, error, cancelled."""
        return self._runner.meta.status

    @property
    def pause_reason(self) -> str | None:
        """Why a paused run stopped and what to do before resuming it (None unless paused)."""
        setup = self._runner.meta.needs_setup
        return setup.get("reason") if setup and self._runner.meta.status == "paused" else None

    @property
    def stage(self) -> str | None:
        """The stage the run is in (or ended in)."""
        return self._runner.meta.current_stage

    @property
    def error(self) -> str | None:
        """The error message of a run that ended in error."""
        return self._runner.meta.error

    @property
    def meta(self) -> dict[str, Any]:
        """A copy of the run record (the content of meta.json)."""
        meta = self._runner.meta
        record = copy.deepcopy(meta.to_dict())
        record["usage"], record["cost_usd"] = self._runner.state.usage.read(meta)  # as run.usage sees them
        return record

    @property
    def flags(self) -> dict[str, Any]:
        """A copy of the run's flags (gates_forced, produced_output, ...)."""
        return self._runner.meta.flags.to_dict()

    @property
    def usage(self) -> dict[str, Any]:
        """Tokens and cost of the run's model calls so far: ``cost_usd`` (the total in USD, None
        while any call's model has no known price), ``total`` and ``by_stage`` (each with calls,
        prompt/completion/cached/cache-write tokens, cost_usd, priced_usd and unpriced_calls).
        Finished child runs (fan-out workers and sub-agents, and theirs) are rolled in (``total``
        and the stage that started them) and also shown apart as ``children`` (with ``runs``)."""
        usage, cost = self._runner.state.usage.read(self._runner.meta)
        return {"cost_usd": cost, "total": usage.get("total") or {}, "by_stage": usage.get("by_stage") or {},
                "children": usage.get("children") or {}}

    @property
    def warnings(self) -> list[Any]:
        """What the run told the person, in order: a ``RunWarning`` each (``code``, ``message``,
        ``stage``, ``at``), as meta.json ``warnings`` keeps them; the codes are listed in
        :mod:`lev_nb.engine.run_warnings`."""
        from lev_nb.engine.run_warnings import RunWarning

        return [RunWarning.from_dict(w) for w in list(self._runner.meta.warnings)]

    @property
    def children(self) -> list[Run]:
        """The runs this run started, in start order: sub-agents (``spawn_agent``) and fan-out
        workers, each a live Run handle (``status``, ``result``, ``wait()``, ``widget()``, its own
        ``children``). ``meta["child_runs"]`` says which kind each one is."""
        return list(self._runner.subagents.handles())

    @property
    def parent_run_id(self) -> str | None:
        """The id of the run that started this one (None for a run started by a person)."""
        return self._runner.meta.parent_run_id

    @property
    def stage_history(self) -> list[str]:
        """The stages entered, in order."""
        return list(self._runner.meta.stage_history)

    @property
    def events(self) -> EventLog:
        """Every event so far and to come; iterate (sync or async) to follow the run."""
        return self._runner.events

    @property
    def run_dir(self) -> str:
        """The folder holding meta.json, events.jsonl, transcript.jsonl and final_output."""
        return str(self._runner.store.dir)

    @property
    def workdir(self) -> str:
        """The run's working directory."""
        return str(self._runner.workdir)

    @property
    def blueprint(self) -> Any:
        """The Blueprint this run runs (read from its agent.leviath for a worker of another agent)."""
        runner = self._runner
        if runner.blueprint is None and runner.plan.source_path:
            from lev_nb.blueprint import load

            runner.blueprint = load(runner.plan.source_path)
        return runner.blueprint

    def graph(self, direction: str | None = None) -> Any:
        """The blueprint's graph with the path this run took, drawn by Mermaid in a notebook."""
        from lev_nb.blueprint.graph import run_diagram

        return run_diagram(self.blueprint, self.stage_history, current=self.stage, status=self.status, direction=direction)

    @property
    def webhook_error(self) -> str | None:
        """Why the completion webhook could not be delivered (None: delivered, or none was asked)."""
        return self._runner.webhook_error

    @property
    def result(self) -> Any:
        """The final output (an ``Output``), or None when the run ended without one. Asked while
        the run is still going and has no output yet, it raises :class:`RunNotFinished` (block
        with ``run.wait()`` or ``await run`` first)."""
        output = self._runner.final_output
        status, future = self.status, self._future
        if output is None and status in LIVE_STATUSES and (future is None or not future.done()):
            raise RunNotFinished(
                f"run {self.run_id} is still {LIVE_STATUSES[status]}, with no result yet; "
                "run.wait() or await run, then read run.result"
            )
        return output

    def read_artifact(self, path: str, offset: int = 0, window: int = ARTIFACT_WINDOW) -> dict[str, Any]:
        """Read a file of the run's workdir a window at a time.

        Returns ``{path, size, offset, next_offset, content}``; ``next_offset`` is None at the end.
        Windows never split a UTF-8 character, so concatenating every window's content gives the
        file exactly. Paths outside the workdir are refused (ValueError).
        """
        from lev_nb.engine.artifacts import read_window

        return read_window(self._runner.workdir, path, offset, window)

    def widget(self, stages: list[str] | None = None) -> Any:
        """A live ipywidgets view of this run (``display`` it); the view comes from the slot
        :mod:`lev_nb.engine.views` holds, which the package facade fills."""
        return views.view(views.RUN_WIDGET, self, stages)

    # -- a person in the loop (docs/runs.md#a-person-in-the-loop) ----------------------------------------
    @property
    def pending(self) -> list[Any]:
        """The requests waiting for a person (``Request``: id, kind, stage, prompt, options, tool,
        arguments, document, created), oldest first; each is also an ``interaction_requested`` event."""
        return self._runner.interaction.pending()

    @property
    def interactive(self) -> bool:
        """Whether this run asks a person (else an ``ask`` tool is denied, a question gets no answer)."""
        return self._runner.interaction.interactive

    def next_request(self, timeout: float | None = None) -> Any:
        """Block until the run waits for a person and return the oldest pending request, or None
        once the run has ended (or ``timeout`` seconds passed)."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            pending = self.pending
            if pending:
                return pending[0]
            if self.done():
                return None
            time.sleep(PENDING_POLL_S)
        return None

    def attend(self) -> None:
        """Say that a person watches this run and can answer it: a run started with
        ``interactive=None`` (the default) asks them from now on. A run started in a notebook
        kernel is attended from its start (its view, ``run.wait()`` and ``%%lev`` show the forms)."""
        self._runner.interaction.attend()

    def respond(self, request_id: str, answer: Any = None, *, choice: int | None = None,
                scope: str | None = None, decline: bool = False, source: str = "python") -> Any:
        """Answer a pending request; safe from any thread. By kind:

        - approval: ``"allow"`` / ``True`` or ``"deny"`` / ``False``, ``scope="once"|"stage"|"run"``;
        - text: the text; choice: ``choice=INDEX`` (from 0) or the option; confirm: True/False;
        - review: None to acknowledge, or feedback text; edit: the edited document;
        - checkpoint: ``choice=INDEX`` or the option, or free text;
        - ``decline=True`` turns any request down.

        ``source`` names who answered in the ``interaction_resolved`` event (python, notebook,
        terminal). Raises ``InteractionError`` (one clear message) for an unknown request or an answer that
        does not fit; returns the ``Answer`` taken.
        """
        return self._runner.interaction.respond(
            request_id, answer, choice=choice, scope=scope, decline=decline, source=source
        )

    def send(self, text: str) -> None:
        """Send the model a message: it arrives as a user turn at the run's next step in a stage
        that ``accepts_messages`` (until then it waits, and a ``message`` event says so)."""
        self._runner.interaction.send(text)

    def subscribe(self, callback: Callable[[Event], None], replay: bool = True) -> None:
        """Call ``callback(event)`` for each event (on the engine thread; keep it quick)."""
        self._runner.events.subscribe(callback, replay=replay)

    # -- waiting and stopping ------------------------------------------------------------
    def _started(self) -> concurrent.futures.Future[None]:
        if self._future is None:
            raise RuntimeError("this run has not been started; lev_nb.run() or bp.run() start runs")
        return self._future

    def done(self) -> bool:
        """True once the run has stopped: a terminal status, or paused."""
        return self._started().done()

    def wait(self, timeout: float | None = None) -> Run:
        """Block until the run ends or pauses (or ``timeout`` seconds pass: TimeoutError); returns self.

        In a notebook the wait keeps the run's forms answering (``views.RUN_WAITER``): a click in
        its view reaches the run while this cell blocks, and a request nobody sees yet shows here."""
        future = self._started()
        if not future.done() and views.has_view(views.RUN_WAITER) and views.view(views.RUN_WAITER, self, timeout):
            return self
        future.result(timeout)
        return self

    def __await__(self) -> Generator[Any, None, Run]:
        future = self._started()
        waiting = views.view(views.RUN_AWAITER, self) if views.has_view(views.RUN_AWAITER) and not future.done() else None
        if waiting is not None:
            yield from waiting.__await__()
        yield from asyncio.wrap_future(future).__await__()
        return self

    def cancel(self) -> None:
        """Stop the run; it ends with status ``cancelled`` and a complete record."""
        self._runner.request_cancel()

    def interrupt(self) -> None:
        """Stop the run so that it can be resumed (what Ctrl-C does to ``lev run``): it pauses with
        the blocker ``interrupted``; a command it was running is stopped, and
        ``lev_nb.resume(run_id)`` continues it (that command is reported to the model as interrupted)."""
        self._runner.request_cancel(resumable=True)

    def __repr__(self) -> str:
        return f"<Run {self.run_id} {self.status} stage={self.stage!r}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if not views.has_view(views.RUN_BUNDLE):
            return {"text/plain": repr(self)}
        return views.view(views.RUN_BUNDLE, self)
