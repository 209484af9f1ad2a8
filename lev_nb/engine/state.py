"""What one run knows about itself while it runs: the shared :class:`RunState`, the per-stage
counters (:class:`StageProgress`, reset on every stage entry, docs/concepts.md#context-regions) and the small
values the run loop passes between its steps (:class:`Outcome`, :class:`Ending`,
:class:`RunFailure`).

The run loop (:mod:`lev_nb.engine.runner`) owns one RunState and hands it to each collaborator it
holds (inference, tools, holds, transitions, hooks, fan-out). Every attribute is public: a
collaborator reads and updates the run through it, never through another object's private state.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lev_nb.engine import events as ev
from lev_nb.engine.run_warnings import DEFAULT_CODE
from lev_nb.records import record
from lev_nb.store.meta import utc_now

T = TypeVar("T")

MAX_WARNINGS = 100  # kept in meta.json; a run that warns more is broken, and its events say the rest

if TYPE_CHECKING:
    from lev_nb.engine.context.run_context import RunContext
    from lev_nb.engine.journal import Journal
    from lev_nb.engine.pipeline.outputs import FinalOutput
    from lev_nb.engine.plan.types import RunPlan, StagePlan
    from lev_nb.engine.record import Recorder, UsageBook
    from lev_nb.settings import Settings
    from lev_nb.store import RunMeta, RunStore


@record(frozen=False)
class StageProgress:
    """What the watchdogs and gates measure within the current stage visit."""

    iterations: int = 0
    total_tool_calls: int = 0
    text_only_nudges: int = 0
    modifying_tool_calls: int = 0
    blocked_modification_calls: int = 0
    gate_reentries: int = 0
    output_reentries: int = 0
    required_reentries: int = 0
    fan_out_reentries: int = 0
    fanned_out: bool = False
    edits_by_path: Counter[str] = field(default_factory=Counter)
    started_at: float = field(default_factory=time.monotonic)
    stuck_fired: bool = False
    digests: dict[str, str] = field(default_factory=dict)
    last_text: str = ""
    repetition: Any = None  # a RepetitionWatch, created at the stage's first tool batch
    points_done: bool = False
    point_cursor: int = 0  # the next interaction point to present (docs/runs.md#a-person-in-the-loop)
    point_rounds: int = 0  # revision rounds of the current point
    point_body: str | None = None  # the person's own edit of the stage's answer, if they made one


@record(frozen=False)
class Outcome:
    """Why a stage stopped other than by finishing normally."""

    kind: str  # error | max_iterations | stuck
    message: str = ""


@record
class Ending:
    """How the run ends: a terminal status and, for ``error``, the message."""

    status: str  # complete | error | cancelled | paused (not terminal)
    error: str | None = None  # for paused: why, and what to set up


class RunFailure(Exception):
    """A failure that ends the run in error with this message (bad input, an unanswerable checkpoint)."""


class RunPaused(Exception):
    """The run cannot go on until a person sets something up
    (docs/providers.md#fallback-and-circuit-breakers): it stops with
    status ``paused``, ``blocker`` (credits | providers) and ``remedy`` in meta.json's needs_setup."""

    def __init__(self, message: str, blocker: str, remedy: str) -> None:
        super().__init__(message)
        self.blocker = blocker
        self.remedy = remedy


def _usage_book() -> UsageBook:
    from lev_nb.engine.record import UsageBook

    return UsageBook()


@record(frozen=False, eq=False)
class RunState:
    """The run's shared state: what it is, where it is, and where it writes.

    Fixed for the whole run: ``plan``, ``run_id``, ``task``, ``inputs`` (the launch inputs),
    ``workdir``, ``entry`` (the stage the run started in), ``store``/``meta``/``rec`` (the run
    record and its writer), ``ctx`` (the context window) and ``settings`` (the configuration when the
    run started; worker runs share their parent's). Moving: ``stage`` (the current stage),
    ``visits`` (entries per stage name), ``progress`` (the current visit's counters),
    ``final_output`` (the accepted answer, if any), ``model_calls`` (model calls so far) and ``enter_hook_pending`` (a stage was entered
    and its ``on_stage_enter`` hook has not fired yet). ``interaction`` is the run's
    :class:`~lev_nb.engine.interaction.InteractionHub` (set by the runner). ``journal`` records
    (and, for a resumed run, replays) what the run acts on; ``usage`` is its token and cost book,
    its child runs' included; ``rejections`` and ``last_rejection`` count the refused answers.
    """

    plan: RunPlan
    run_id: str
    task: str
    inputs: dict[str, str]
    workdir: Path
    entry: str
    store: RunStore
    meta: RunMeta
    rec: Recorder
    ctx: RunContext
    stage: StagePlan
    settings: Settings
    visits: dict[str, int] = field(default_factory=dict)
    progress: StageProgress = field(default_factory=StageProgress)
    final_output: FinalOutput | None = None
    enter_hook_pending: bool = False
    model_calls: int = 0  # every model call made (answered or failed): the idle-loop watchdog reads it
    interaction: Any = None  # the run's InteractionHub (lev_nb.engine.interaction): requests to a person
    journal: Journal | None = None  # what a resume replays (a root run's; worker runs keep none)
    usage: UsageBook = field(default_factory=lambda: _usage_book())
    rejections: int = 0  # submit_output calls refused so far
    last_rejection: tuple[str, str] | None = None  # (which check refused it, why) of the latest

    def rejection_summary(self) -> str:
        """How the run's answers were refused, for the error of a run that ends without one:
        how many times, the last reason, and which check gave it ("" when none was refused)."""
        if not self.rejections or self.last_rejection is None:
            return ""
        by, reason = self.last_rejection
        times = "once" if self.rejections == 1 else f"{self.rejections} times"
        return (f"submit_output was called and refused {times}; the last answer was rejected by {by}: "
                f"{' '.join(reason.split())[:300]}")

    def warn(self, message: str, code: str = DEFAULT_CODE, *, in_stage: bool = True) -> None:
        """Tell the person something that changes what the run produced or did (the one door:
        :mod:`lev_nb.engine.run_warnings` lists the codes). Kept once in meta.json ``warnings``
        (a repeat of the same code, message and stage is not told again) and emitted as a
        ``warning`` event, which ``lev run`` prints on stderr and the run view shows as a call-out.
        ``in_stage`` False: it belongs to the run, not to the current stage (before any stage)."""
        rec = self.rec
        if rec.muted:  # a resumed run replaying its past: those warnings are on record already
            return
        if rec.secrets:  # run.warnings reads the record in memory, which is never scrubbed on write
            from lev_nb.secrets import redact

            message = redact(message, rec.secrets)
        stage = self.stage.name if in_stage else None
        told = self.meta.warnings
        if any(w.get("code") == code and w.get("message") == message and w.get("stage") == stage for w in told):
            return
        if len(told) < MAX_WARNINGS:
            told.append({"code": code, "message": message, "stage": stage, "at": utc_now()})
        elif len(told) == MAX_WARNINGS:
            told.append({"code": DEFAULT_CODE, "stage": None, "at": utc_now(),
                         "message": f"more than {MAX_WARNINGS} warnings: the later ones are only in events.jsonl"})
        rec.emit(ev.Warning_(self.run_id, stage, message=message, code=code))
        rec.save(force=True)

    async def in_context(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, a write into the context: on a worker thread when the run has
        custom-region scripts (their on_write and on_overflow run inside the write and may be slow,
        while every run shares the engine thread), else here."""
        if getattr(self.ctx, "scripted", False):
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def nudge(self, reason: str, text: str) -> None:
        """Tell the model ``text`` as a system nudge, and record why."""
        await self.in_context(self.ctx.nudge, text)
        self.rec.emit(ev.Nudge(self.run_id, self.stage.name, reason=reason, text=text))

    def keep_final_output(self, output: FinalOutput) -> None:
        """Make ``output`` the run's answer: in this state, on disk, in meta.json and in context."""
        from lev_nb.store import FINAL_OUTPUT

        self.final_output = output
        self.rec.writer.write_file(self.store, FINAL_OUTPUT, output.content.encode("utf-8"))
        self.meta.final_output = output.descriptor()
        self.ctx.mirror_final_output(output.content)
