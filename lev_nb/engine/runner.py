"""The run loop: one blueprint run as an asyncio task on the engine thread (docs/runs.md#the-run-loop).

Each iteration (docs/runs.md#the-run-loop): the watchdogs, one inference, the tool batch (or the text-only
nudge), the exit holds while the stage owes something, then the transition (condition edges,
normal resolution, the routing call, gates, transforms) until the run is terminal. Every step is
written to the run record, so a run killed half-way leaves a readable meta.json.

:class:`Runner` owns the lifecycle (start, the loop, the end, cancellation) and holds the
collaborators that do the work, each given the shared :class:`~lev_nb.engine.state.RunState` and
what else it needs explicitly:

- :class:`~lev_nb.engine.pipeline.inference.Inference`: model calls;
- :class:`~lev_nb.engine.pipeline.tools.StageTools`: the stage's tools and a batch of calls;
- :class:`~lev_nb.engine.pipeline.holds.ExitHolds`: nudges and what a stage owes before it leaves;
- :class:`~lev_nb.engine.pipeline.points.InteractionPoints`: a stage's checkpoints, and
  :class:`~lev_nb.engine.interaction.InteractionHub`: requests to a person, and messages;
- :class:`~lev_nb.engine.pipeline.transitions.Transitions`: where a stage goes, and entering it;
- :class:`~lev_nb.engine.pipeline.compaction.Compactor`: summaries of regions (transforms, thresholds,
  the model's window);
- :class:`~lev_nb.engine.pipeline.hooks.RunHooks`: the stage hooks;
- :class:`~lev_nb.engine.pipeline.fanout.FanOut`: worker runs;
- :class:`~lev_nb.engine.pipeline.subagents.SubAgents`: the child runs (sub-agents and workers),
  the sub-agent tools, the ``requires_children`` hold and messages sent to this run.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from lev_nb.blueprint.constants import MAX_GATE_ATTEMPTS
from lev_nb.engine import events as ev
from lev_nb.engine import views
from lev_nb.engine.context.handover import Handover, handovers, mappings_for, problems, receive
from lev_nb.engine.context.run_context import build_context
from lev_nb.engine.context.seeds import seed_context
from lev_nb.engine.eventlog import EventLog
from lev_nb.engine.journal import Journal
from lev_nb.engine.pipeline.compaction import Compactor
from lev_nb.engine.pipeline.fanout import FanOut
from lev_nb.engine.pipeline.gates import modifying_tools
from lev_nb.engine.interaction import InteractionHub
from lev_nb.engine.pipeline.holds import ExitHolds
from lev_nb.engine.pipeline.points import InteractionPoints
from lev_nb.engine.pipeline.hooks import HookFailure, RunHooks
from lev_nb.engine.pipeline.inference import Inference, RetryPolicy, model_label, retry_policy
from lev_nb.engine.pipeline.outputs import FinalOutput
from lev_nb.engine.pipeline.routing import find_conditioned
from lev_nb.engine.pipeline.subagents import SubAgents
from lev_nb.engine.pipeline.tools import StageTools
from lev_nb.engine.pipeline.transitions import Transitions
from lev_nb.engine.pipeline.watchdogs import check_watchdogs
from lev_nb.engine.plan.types import OutputSpec, RunPlan
from lev_nb.engine.record import Recorder
from lev_nb.errors import CALLEE_ERRORS
from lev_nb.engine.state import Ending, Outcome, RunFailure, RunPaused, RunState, StageProgress
from lev_nb.engine.title import start_title, stop_title
from lev_nb.providers.base import Provider
from lev_nb.store.files import inbox_stamps

if TYPE_CHECKING:
    from lev_nb.engine.resume import Resumption
    from lev_nb.settings import Settings
    from lev_nb.store import RunMeta, RunStore


# A loop iteration without a model call only moves the run's bookkeeping; this many in a row and
# the stage cannot change any more (a gate re-asked at the iteration cap spins forever otherwise).
IDLE_ITERATION_LIMIT = 50
_INHERIT: Any = object()  # spawn_child: the child takes this run's output request

# How often a root run reads its inbox between its steps (a cancel from another process).
INBOX_WATCH_S = 1.0


class _InboxWatch:
    """Every root run of this process reads its inbox every INBOX_WATCH_S even while a model
    call or a tool runs, so a cancel from another process (lev cancel) is not held up by a long
    step; a run also reads it at every step. One task on the engine loop does it for all of them
    (one native call looks at every run's inbox folder), and only while there is a root run.
    Kept per loop: a forked worker process starts its own engine loop."""

    runners: dict[asyncio.AbstractEventLoop, set[Runner]] = {}

    @classmethod
    def add(cls, runner: Runner) -> None:
        """Watch ``runner``'s inbox from now on (called on the engine loop)."""
        loop = asyncio.get_running_loop()
        watched = cls.runners.get(loop)
        if watched is None:
            watched = cls.runners[loop] = set()
            loop.create_task(cls._watch(loop, watched))
        watched.add(runner)

    @classmethod
    def discard(cls, runner: Runner) -> None:
        """Stop watching ``runner`` (its run is ending; called on the engine loop)."""
        cls.runners.get(asyncio.get_running_loop(), set()).discard(runner)

    @classmethod
    async def _watch(cls, loop: asyncio.AbstractEventLoop, watched: set[Runner]) -> None:
        try:
            while watched:
                await asyncio.sleep(INBOX_WATCH_S)
                runners = list(watched)
                stamps = inbox_stamps([runner.state.store for runner in runners])  # one call for all
                for runner, stamp in zip(runners, stamps):
                    try:
                        runner.interaction.poll_inbox_stamped(stamp)
                    except CALLEE_ERRORS as exc:  # never the end of the run: it reads its inbox at its next step
                        runner.state.warn(f"the run's inbox could not be read: {exc}")
        finally:
            cls.runners.pop(loop, None)


# Ids of the runs this process is running now: a resume refuses them (their pid is this one's).
ACTIVE_RUNS: set[str] = set()


class Runner:
    """One run: its state, its collaborators and its loop. Create it, then schedule :meth:`main`
    on the engine loop (``start_run`` does both)."""

    # Slots: a runner holds more attributes than Python shares keys for (30), so each instance
    # carried a dict of its own, 1.6 KiB of every live run; slots hold them in 0.4.
    __slots__ = (
        "_cancel_reason", "_cancel_requested", "_cancel_sent", "_cancellable", "_ending", "_interrupted",
        "_record_error", "_script_error", "_task", "_title_task", "_workdir_given", "agents_started",
        "approver", "blueprint", "compactor", "depth", "depth_source", "events", "fan_out", "handed", "handle",
        "holds", "hook_scripts", "hooks", "inference", "max_child_depth", "on_complete", "output_request",
        "parent", "plan", "points", "provider", "region_scripts", "resumption", "retry", "settings", "state",
        "subagents", "tools", "transitions", "validators", "webhook", "webhook_error",
    )

    def __init__(
        self,
        plan: RunPlan,
        *,
        task: str,
        provider: Provider | None,
        workdir: str | os.PathLike[str] | None,
        inputs: dict[str, str] | None = None,
        output_request: OutputSpec | None = None,
        on_complete: Callable[[Any], None] | None = None,
        home: str | os.PathLike[str] | None = None,
        retry: RetryPolicy | None = None,
        approver: Callable[[str, dict[str, Any]], bool] | None = None,
        validators: dict[str, Any] | None = None,
        entry: str | None = None,
        parent: Runner | None = None,
        webhook: str | None = None,
        hook_scripts: dict[str, Any] | None = None,
        region_scripts: dict[str, Any] | None = None,
        settings: Settings | None = None,
        yolo: bool = False,
        allow: tuple[str, ...] | list[str] = (),
        interactive: bool | None = False,
        max_depth: int | None = None,
        max_child_depth: tuple[int, str] | None = None,
        resume: Resumption | None = None,
        launch_record: dict[str, Any] | None = None,
    ) -> None:
        from lev_nb import store
        from lev_nb.settings import current as current_settings

        self.plan = plan
        self.provider = provider
        self.output_request = output_request
        self.on_complete = on_complete
        # The configuration is read once, when the run is created; a worker shares its parent's.
        if settings is None:
            settings = parent.settings if parent is not None else current_settings()
        self.settings: Settings = settings
        self.retry = retry or retry_policy(settings)
        self.approver = approver
        self.validators = dict(validators or {})
        self.webhook = webhook
        self.webhook_error: str | None = None  # why the completion webhook failed, if it did
        self.parent = parent
        self.depth: int = parent.depth + 1 if parent is not None else 0
        # How deep the tree of child runs may go, and where that limit came from: the root run's
        # launch (max_depth), else its blueprint, else the configuration; a child keeps its parent's
        # limit unless ``max_child_depth`` tightens it (spawn_agent).
        if max_child_depth is not None:
            limit, source = max_child_depth
        elif parent is not None:
            limit, source = parent.max_child_depth, parent.depth_source
        elif max_depth is not None:
            limit, source = max_depth, "launch"
        elif plan.max_child_depth is not None:
            limit, source = plan.max_child_depth, "blueprint"
        else:
            limit, source = settings.limits.max_child_depth, "configuration"
        self.max_child_depth: int = limit
        self.depth_source: str = source
        self.events = EventLog()
        self.resumption = resume
        if resume is not None:
            # The resumed run's events start with its previous life's (events.jsonl), so run.events
            # and the run view tell the whole story.
            for data in resume.events:
                try:
                    self.events.append(ev.event_from_dict(data))
                except (KeyError, TypeError, ValueError):
                    continue  # an event of another version
        self.handle: Any = None  # set by start_run to the public Run handle
        # The Blueprint this plan came from: set by start_run, shared by workers of the same plan.
        self.blueprint: Any = parent.blueprint if parent is not None and parent.plan is plan else None

        run_id = resume.run_id if resume is not None else store.new_run_id(plan.agent_name)
        # Tracing, when configured, watches the run's events from here on (never the replayed ones
        # of a resumed run); it raises before the record exists if it is configured but cannot work.
        observer = views.run_observer(settings, run_id, parent.run_id if parent is not None else None)
        if observer is not None:
            self.events.subscribe(observer, replay=False)
        run_store = store.RunStore(run_id, home=home)
        workdir_path = Path(workdir) if workdir is not None else run_store.dir / "workdir"
        self._workdir_given = workdir is not None
        meta = store.RunMeta(
            run_id=run_id,
            agent_name=plan.agent_name,
            agent_path=plan.source_path or "",
            task=task,
            workdir=str(workdir_path),
            num_stages=len(plan.stages),
        )
        if resume is not None:
            resume.carry_into(meta)
        if parent is None:
            # The record exists before the run starts, and a run that cannot write it does not
            # start (RecordUnwritable names the folder and the cause). A resumed run claims its
            # record this way: status starting, this process's pid.
            meta.pid = os.getpid()
            run_store.create(store.encode_meta(meta.to_dict(shared=True)),
                             store.encode_meta(launch_record) if launch_record is not None else None)
        else:
            meta.pid = os.getpid()  # a worker runs in its parent's process
        if output_request is not None and not output_request.is_empty():
            meta.output_request = {k: v for k, v in output_request.__dict__.items() if v is not None}
        if parent is not None:
            meta.parent_run_id = parent.run_id
            meta.depth = self.depth
        # Launch permissions: a child run inherits its parent's (docs/security.md#permissions).
        meta.yolo = parent.meta.yolo if parent is not None else bool(yolo)
        meta.allowed_tools = list(parent.meta.allowed_tools) if parent is not None else list(dict.fromkeys(allow))
        meta.max_child_depth = self.max_child_depth
        entry = entry or plan.entry
        meta.model = model_label(provider, plan.stage(entry), settings)

        # Stage hooks and custom-region scripts: start_run compiles them before the run exists
        # (so a broken one raises there); a worker run of another blueprint compiles its own and
        # fails at its start when one is broken.
        self._script_error: str | None = None
        self._title_task: asyncio.Task[None] | None = None  # a title being written beside the run
        if hook_scripts is None or region_scripts is None:
            hook_scripts, region_scripts = self._compile_scripts(hook_scripts, region_scripts)
        self.hook_scripts, self.region_scripts = hook_scripts, region_scripts

        self.state = RunState(
            plan=plan,
            run_id=run_id,
            task=task,
            inputs=dict(inputs or {}),
            workdir=workdir_path,
            entry=entry,
            store=run_store,
            meta=meta,
            rec=Recorder(run_store, meta, self.events),
            ctx=build_context(plan, region_scripts),
            stage=plan.stage(entry),
            settings=settings,
        )
        state = self.state
        state.rec.usage = state.usage
        if parent is None:
            ACTIVE_RUNS.add(run_id)  # until main() ends (start_run starts every Runner it makes)
            # Root runs journal what they act on, so `lev resume` can continue them.
            state.journal = Journal(
                run_store, resume.journal if resume is not None else None, scrub=state.rec.scrub,
                on_live=self._went_live, on_write_error=state.warn, writer=state.rec.writer,
            )
            # The model the run started with (its script) goes on where the run stopped.
            state.journal.tells_provider = resume is not None and resume.same_model
        if state.ctx.region_host is not None:
            state.ctx.region_host.bind(state, lambda: model_label(provider, state.stage, settings))
        self.hooks = RunHooks(state, hook_scripts)
        self.fan_out = FanOut(
            state, spawn=self.spawn_child, depth=self.depth, max_child_depth=self.max_child_depth
        )
        self.subagents = SubAgents(
            state, spawn=self.spawn_child, depth=self.depth, max_child_depth=self.max_child_depth,
            depth_source=self.depth_source, provider=provider, tree=self.tree_spawn_refusal,
        )
        self.tools = StageTools(
            state,
            approver=approver,
            validators=self.validators,
            output_request=output_request,
            fan_out=self.fan_out.run,
            subagents=self.subagents.call,
            recall_child=self.subagents.recall,
        )
        self.inference = Inference(state, provider=provider, retry=self.retry, tools=self.tools, hooks=self.hooks)
        self.holds = ExitHolds(state)
        # A child's requests are held by its root run, so whoever watches the root answers them.
        state.interaction = InteractionHub(
            state,
            interactive=interactive,
            parent=parent.interaction if parent is not None else None,
        )
        state.interaction.on_cancel = self._cancel_from_inbox
        self.points = InteractionPoints(state)
        self.compactor = Compactor(state, self.inference)
        self.handed: list[Handover] = []  # [[transforms]]: what the parent hands this child (spawn_child)
        self.transitions = Transitions(state, self.inference, self.tools.output_spec, self.compactor)
        self._ending: Ending | None = None
        self._task: asyncio.Task[None] | None = None
        self._cancel_requested = False
        self._cancel_sent = False
        self._interrupted = False  # stopped to be resumed later (Ctrl-C), not cancelled
        self.agents_started = 0  # on the root run: sub-agents started anywhere in its tree
        self._cancellable = False
        self._cancel_reason: str | None = None  # who cancelled it from another process (lev cancel)
        # Why the run's record stopped reaching the disk (full disk, a forged line), if it did
        self._record_error: str | None = None
        self.state.rec.writer.watch(self.run_id, self._record_failed)

    # ------------------------------------------------------------------ what the Run handle reads
    @property
    def interaction(self) -> InteractionHub:
        """The run's requests to a person and its queued messages."""
        hub: InteractionHub = self.state.interaction
        return hub

    @property
    def run_id(self) -> str:
        """The run's id (also its folder's name)."""
        return self.state.run_id

    @property
    def meta(self) -> RunMeta:
        """The run record (RunMeta) as it stands."""
        return self.state.meta

    @property
    def store(self) -> RunStore:
        """The run's folder (RunStore)."""
        return self.state.store

    @property
    def workdir(self) -> Path:
        """The run's working directory."""
        return self.state.workdir

    @property
    def progress(self) -> StageProgress:
        """The current stage visit's counters."""
        return self.state.progress

    @property
    def final_output(self) -> FinalOutput | None:
        """The accepted answer, if any."""
        return self.state.final_output

    # ------------------------------------------------------------------ lifecycle
    def request_cancel(self, *, resumable: bool = False) -> None:
        """Ask the run to stop; safe to call from any thread. ``resumable``: it pauses (blocker
        ``interrupted``) so that ``lev resume`` continues it, instead of ending ``cancelled``."""
        from lev_nb.engine.loop import engine_loop

        if resumable and not self._cancel_requested:
            self._interrupted = True
        self._cancel_requested = True
        engine_loop().call_soon(self._cancel_task)

    def _cancel_from_inbox(self, by: str) -> None:
        """``lev cancel`` from another process (a ``cancel`` in the run's inbox): the run ends
        cancelled, and its record (meta.json ``error``, the ``completed`` event) says by whom."""
        self._cancel_reason = f"cancelled by {by}"
        self.request_cancel()

    def _cancel_task(self) -> None:
        # Only the running phase is cancelled: once the run is ending (terminal hook, last record
        # writes) a cancel would only cut its record short, so it is ignored there. And only once:
        # a second request (a second Ctrl-C) landing while the first unwinds would cancel the
        # run's own clean-up.
        if self._task is not None and self._cancellable and not self._task.done() and not self._cancel_sent:
            self._cancel_sent = True
            self._task.cancel()

    def _record_failed(self, reason: str) -> None:
        """The record writer could not write this run's lines, or found them forged (called on the
        writer's thread): the run stops and ends in error."""
        from lev_nb.engine.loop import engine_loop

        def stop() -> None:
            self._record_error = f"the run record in '{self.state.store.dir}' is not intact: {reason}"
            if self._task is not None and self._cancellable and not self._task.done():
                self._cancel_sent = True
                self._task.cancel()

        engine_loop().call_soon(stop)

    async def main(self) -> None:
        """Run to a terminal status. Never raises: every failure ends in a written record."""
        self._task = asyncio.current_task()
        if self.parent is None:
            _InboxWatch.add(self)
        try:
            try:
                self._cancellable = True
                if self._cancel_requested:
                    raise asyncio.CancelledError
                await self._start()
                self._ending = await self._loop()
            except asyncio.CancelledError:
                if self._record_error:
                    self._ending = Ending("error", self._record_error)
                elif self._interrupted:
                    reason = f"was interrupted (Ctrl-C); `lev resume {self.run_id}` continues it"
                    self._ending = Ending("paused", reason)
                    self.state.meta.needs_setup = {"blocker": "interrupted", "remedy": "", "reason": reason}
                else:
                    self._ending = Ending("cancelled", self._cancel_reason)
            except (RunFailure, HookFailure) as exc:
                self._ending = Ending("error", str(exc))
            except RunPaused as exc:
                self._ending = Ending("paused", str(exc))
                self.state.meta.needs_setup = {"blocker": exc.blocker, "remedy": exc.remedy, "reason": str(exc)}
            except CALLEE_ERRORS as exc:  # a bug, or a callee's SystemExit: still a readable record
                self.state.warn(traceback.format_exc(), "internal-error")
                self._ending = Ending("error", f"internal error: {type(exc).__name__}: {exc}")
            self._cancellable = False
            # Sub-agents still running end with this run (and their own children with them).
            await self.subagents.stop_all(self._ending.status if self._ending else "error")
            await self._end()
        finally:
            await stop_title(self._title_task)  # the run never waits for its title
            _InboxWatch.discard(self)
            paused = self.state.meta.status == "paused"  # not over: no webhook, no on_complete yet
            if self.webhook and not paused:
                await self._post_webhook()
            self.tools.sandboxes.close()
            await self.state.rec.flushed()
            if self._check_record():  # the record says what happened, as far as the disk allows
                try:
                    self.state.rec.save(final=True)
                except OSError:
                    pass
                await self.state.rec.flushed()
            self.state.rec.writer.forget(self.state.run_id)
            self.events.close()
            ACTIVE_RUNS.discard(self.run_id)
            if self.parent is not None:
                self.parent.subagents.child_ended(self)
            if not paused:
                self._notify_complete()

    async def _post_webhook(self) -> None:
        from lev_nb.engine.webhook import FAILURE_PREFIX, completion_payload, deliver

        if self.webhook is None:
            return
        policy = self.state.settings.webhook
        try:
            payload = completion_payload(self.state.meta.to_dict(), self.state.final_output)
            await asyncio.to_thread(
                deliver, self.webhook, payload, max_retries=policy.max_retries, base_delay_ms=policy.base_delay_ms,
                max_delay_ms=policy.max_delay_ms, timeout_secs=policy.timeout_secs)
        except CALLEE_ERRORS as exc:  # a delivery never breaks the run's clean-up
            self.webhook_error = str(exc)
            self.state.warn(f"{FAILURE_PREFIX}: {exc}", "webhook-failed")

    async def _start(self) -> None:
        state = self.state
        state.meta.status = "running"
        state.meta.flags.no_output_tools = not any(
            set(s.tools) & modifying_tools(s) for s in self.plan.stages
        )
        state.rec.save(force=True)
        if self.resumption is not None and state.journal is not None:
            resumed = state.meta.resumed or {}
            state.rec.emit(ev.Resumed(
                state.run_id, None, count=int(resumed.get("count") or 1), from_status=self.resumption.from_status,
                replayed_model_calls=state.journal.model_calls, replayed_tool_calls=state.journal.tool_results,
            ))
            for note in self.resumption.notes:
                state.warn(note, "resume-changed", in_stage=False)
            # What the journal replays is on record already: nothing is written again until the
            # run goes live (Journal calls _went_live).
            state.rec.muted = state.journal.replaying
        state.rec.emit(
            ev.RunStarted(
                state.run_id, None, agent=self.plan.agent_name, task=state.task, workdir=str(state.workdir)
            )
        )
        self._title_task = start_title(state, self.plan, self.provider, top_level=self.parent is None,
                                       resumed=self.resumption is not None)
        for message in self.plan.ignored_values:
            state.warn(message, "wrong-type", in_stage=False)
        if self._script_error is not None:
            raise RunFailure(self._script_error)
        if self._workdir_given and not state.workdir.exists():
            state.warn(f"the working directory '{state.workdir}' did not exist, so the run created it", in_stage=False)
        try:
            state.workdir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunFailure(f"the working directory '{state.workdir}' cannot be created: {exc.strerror or exc}") from None
        await self.tools.prepare_sandboxes()
        await self.tools.prepare_mcp()
        self.tools.use_sandbox(self.plan.sandbox, "the agent")  # seed commands run in the agent's
        await seed_context(state, self.tools.registry, self.tools.tool_context)
        summarise = self._receive_handover()
        self.transitions.enter(state.entry, None)
        if summarise:
            await self.compactor.summarise_regions(summarise, "transform", None)

    def _receive_handover(self) -> list[str]:
        """Fill this child's regions from what its parent handed over (after its own seeds); the
        regions a ``summarize`` mapping filled, to be summarised before the first turn."""
        if not self.handed or self.parent is None:
            return []
        for problem in problems(self.state.ctx, self.handed, self.parent.plan.agent_name):
            self.state.warn(problem, "context-kept", in_stage=False)
        return receive(self.state.ctx, self.handed)[1]

    def _compile_scripts(
        self, hook_scripts: dict[str, Any] | None, region_scripts: dict[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        from lev_nb.engine.prepare import compile_run_scripts
        from lev_nb.scripting import ScriptError

        try:
            hooks, regions = compile_run_scripts(self.plan)
        except ScriptError as exc:
            self._script_error = exc.message
            return hook_scripts or {}, region_scripts or {}
        return (hooks if hook_scripts is None else hook_scripts), (regions if region_scripts is None else region_scripts)

    def _went_live(self) -> None:
        """The resumed run has replayed its journal: its record continues from here."""
        rec = self.state.rec
        if rec.muted:
            rec.muted = False
            rec.save(force=True)
        self.subagents.start_again()  # sub-agents that paused in its previous life

    async def _end(self) -> None:
        """Fire the terminal hook (unless cancelled), then record how the run ended."""
        if self.state.journal is not None:
            self.state.journal.go_live()  # a run that ends while replaying still records its end
        ending = self._ending or Ending("error", "internal error: the run stopped without a status")
        status, error = ending.status, ending.error
        self.tools.close_mcp()
        if status == "paused":  # not an end: the terminal hook fires when the resumed run ends
            self._record_pause(error or "paused")
            return
        self.interaction.close()
        if status != "cancelled":
            try:
                status, error = await self.hooks.terminal(status, error)
            except asyncio.CancelledError:
                status, error = "cancelled", None
            except CALLEE_ERRORS as exc:  # a bug in lev_nb must still leave a readable record
                self.state.warn(traceback.format_exc(), "internal-error")
                status, error = "error", f"internal error: {type(exc).__name__}: {exc}"
        self._record_end(status, error)

    def _record_end(self, status: str, error: str | None = None) -> None:
        state = self.state
        meta, flags = state.meta, state.meta.flags
        meta.status = status
        refused = state.rejection_summary() if state.final_output is None else ""
        if status == "error" and error is not None and refused and refused not in error:
            error = f"{error} ({refused})"  # why there is no answer, whatever ended the run
        if error is not None:
            meta.error = error
        flags.produced_output = state.final_output is not None
        flags.empty_output = (
            flags.modified_file_count == 0
            and not flags.produced_output
            and not flags.no_output_tools
        )
        try:
            state.rec.save(final=True)
        except OSError:
            pass
        state.rec.emit(
            ev.Completed(
                state.run_id,
                state.stage.name,
                status=status,
                error=error,
                produced_output=flags.produced_output,
                final_output=state.final_output.descriptor() if state.final_output else None,
            )
        )

    def _record_pause(self, reason: str) -> None:
        state = self.state
        state.meta.status = "paused"
        setup = state.meta.needs_setup or {}
        try:
            state.rec.save(final=True)
        except OSError:
            pass
        state.rec.emit(
            ev.Paused(state.run_id, state.stage.name, reason=reason, blocker=setup.get("blocker", ""),
                      remedy=setup.get("remedy", ""))
        )

    def _check_record(self) -> bool:
        """The run's last meta.json did not reach the disk (full, read-only), or its lines stopped
        reaching it or were forged after the run could still stop: the run did not complete as far
        as its record goes, so it ends in error, saying where and why. True when that changed it."""
        state = self.state
        writer = state.rec.writer
        failure = writer.meta_failure(state.run_id)
        lines = writer.line_failure(state.run_id)
        if failure is not None:
            message = f"the run record in '{state.store.dir}' could not be written: {failure}"
        elif lines is not None and state.meta.status != "error":
            message = self._record_error or f"the run record in '{state.store.dir}' is not intact: {lines}"
        else:
            return False
        state.meta.status = "error"
        state.meta.error = message
        return True

    def _notify_complete(self) -> None:
        if self.on_complete is None:
            return
        try:
            self.on_complete(self.handle)
        except CALLEE_ERRORS as exc:
            self.state.warn(f"on_complete callback failed: {exc!r}", "script-failed")

    # ------------------------------------------------------------------ the loop
    async def _loop(self) -> Ending:
        """Iterate until a transition ends the run; returns how it ends."""
        state = self.state
        idle, calls_seen, idle_fired = 0, state.model_calls, False
        gates_seen = state.progress.gate_reentries
        while True:
            # Yield on every iteration: a cancel and every other run on the engine loop get their
            # turn even while this run only does bookkeeping (a gate re-asked, a hold, a watchdog).
            await asyncio.sleep(0)
            if state.model_calls != calls_seen:
                calls_seen, idle, idle_fired = state.model_calls, 0, False
            elif gates_seen < state.progress.gate_reentries <= MAX_GATE_ATTEMPTS:
                # A gate used one of its attempts: progress toward being forced (max_attempts,
                # at most MAX_GATE_ATTEMPTS, bounds it), not an idle round, even with no model
                # call in between. Past that bound (a plan built around validation) it is idle.
                idle = 0
            else:
                idle += 1
                if idle > IDLE_ITERATION_LIMIT:
                    ending = await self._idle_stuck(idle_fired)
                    if ending is not None:
                        return ending
                    idle, idle_fired = 0, True
                    continue
            gates_seen = state.progress.gate_reentries
            if state.enter_hook_pending:
                state.enter_hook_pending = False
                await self.hooks.stage_enter()
            self.subagents.check_paused()  # a sub-agent paused for setup: this run pauses too
            self.interaction.deliver_messages()
            outcome = check_watchdogs(state)
            if outcome is None:
                await self.compactor.maintain()
                response = await self.inference.stage_turn()
                if isinstance(response, Outcome):
                    outcome = response
                elif response.tool_calls:
                    await self.tools.run_batch(response)
                    failure = self.fan_out.take_failure()
                    if failure is not None:
                        outcome = Outcome("error", failure)
                    else:
                        merge = self.fan_out.take_merge()
                        if merge is None:
                            continue
                        if merge:
                            await self.hooks.stage_exit()
                            self.transitions.move(merge, "fan_out", "direct", "the workers finished")
                            continue
                        outcome = None  # no merge stage: resolve the fan-out stage's own edges
                    await self.hooks.stage_exit()
                    ending = await self.transitions.resolve(outcome)
                    if ending is not None:
                        return ending
                    continue
                elif await self.holds.nudge_text_only(response):
                    continue
            if state.stage.requires_children:
                # The first exit hold (docs/concepts.md#nudges-and-holds).
                await self.subagents.await_children()
            if await self.holds.hold(outcome):
                continue
            if await self.points.hold(outcome):
                continue
            await self.hooks.stage_exit()
            ending = await self.transitions.resolve(outcome)
            if ending is not None:
                return ending

    async def _idle_stuck(self, again: bool) -> Ending | None:
        """The stage went IDLE_ITERATION_LIMIT iterations without a model call, so nothing will
        change: it is stuck by definition. It leaves by its stuck edge, else its error edge, else
        the run ends in error; ``again`` (no model call since the last time) ends the run."""
        state = self.state
        message = (
            f"stage '{state.stage.name}' went {IDLE_ITERATION_LIMIT} loop iterations without a model "
            "call (a gate, hold or watchdog kept sending it round), so it is stuck"
        )
        if again:
            return Ending("error", message)
        state.rec.emit(ev.Stuck(state.run_id, state.stage.name, reason=message))
        has_stuck_edge = find_conditioned(state.plan, state.stage, state.visits, "stuck") is not None
        await self.hooks.stage_exit()
        return await self.transitions.resolve(Outcome("stuck" if has_stuck_edge else "error", message))

    # ------------------------------------------------------------------ child runs
    def tree_spawn_refusal(self) -> str | None:
        """Why no sub-agent may start in this run's tree now (None: one may, and it is counted).

        A run that is stopping, or whose ancestor is, starts none (its children would only be
        cancelled), and the whole tree, from the run the user started down, starts at most
        ``[limits] max_agents_per_tree`` sub-agents."""
        runner: Runner | None = self
        root = self
        while runner is not None:
            if runner._cancel_requested:
                who = "this run is" if runner is self else f"its ancestor run '{runner.run_id}' is"
                return f"[denied] spawn_agent: {who} stopping, so no sub-agent may start"
            root = runner
            runner = runner.parent
        cap = self.state.settings.limits.max_agents_per_tree
        if root.agents_started >= cap:
            return (f"[denied] spawn_agent: this run's tree has started {root.agents_started} sub-agents, the "
                    f"most [limits] max_agents_per_tree = {cap} allows; finish with the ones you have")
        root.agents_started += 1
        return None

    def spawn_child(
        self,
        plan: RunPlan,
        entry: str,
        task: str,
        *,
        kind: str = "worker",
        output_request: Any = _INHERIT,
        validators: dict[str, Any] | None = None,
        max_child_depth: tuple[int, str] | None = None,
    ) -> Runner:
        """A child run of ``plan`` entered at ``entry``, sharing this run's model, settings and
        workdir, linked to this run (see :meth:`SubAgents.adopt`). ``kind`` is ``worker`` (a fan-out
        worker: it inherits the launch's output request) or ``agent`` (spawn_agent: it gets its own).
        The caller runs it (``await child.main()``, or as a task)."""
        child = Runner(
            plan,
            task=task,
            provider=self.provider,
            workdir=self.state.workdir,
            output_request=self.output_request if output_request is _INHERIT else output_request,
            home=self.state.store.run_dir.parent.parent,
            retry=self.retry,
            approver=self.approver,
            validators=self.validators if validators is None else validators,
            entry=entry,
            parent=self,
            hook_scripts=self.hook_scripts if plan is self.plan else None,
            region_scripts=self.region_scripts if plan is self.plan else None,
            max_child_depth=max_child_depth,
        )
        child.handed = handovers(self.state.ctx, mappings_for(self.plan, plan))
        self.subagents.adopt(child, kind)
        return child
