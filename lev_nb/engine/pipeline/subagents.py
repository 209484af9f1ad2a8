"""Agents that start agents (docs/runs.md#agents-that-start-agents): the tools ``spawn_agent``,
``check_agent``, ``wait_for_agent``, ``send_to_agent`` and ``kill_agent``, the links between a run
and its child runs, and what a child's end means for its parent.

A resumed run (:mod:`lev_nb.engine.resume`) never starts a child twice: each spawn is journaled
before the child starts, and each sub-agent's end (its result and cost) when it ends. Replaying a
``spawn_agent`` call recalls the child instead: a child that had ended answers ``check_agent`` and
``wait_for_agent`` with its journaled result; one still running when the process stopped is
reported to the model as lost (status error, its files left in the working directory), since a
child cannot be continued from where it was: the model decides whether to start it again.

A sub-agent that pauses (its model out of credits or out of reach, no fallback left) pauses its
parent too, as a fan-out worker does: the parent stops at its next model turn, or at once when it
waits on that sub-agent (``wait_for_agent``, ``spawn_agent`` with ``wait``, ``check_agent``, a
``requires_children`` hold), with the sub-agent's ``needs_setup`` (blocker, remedy) and a reason
naming it; its other sub-agents are stopped (journaled ``paused`` too, so they start again). A sub-agent is never resumed on its own: its record
ends ``cancelled``, saying so, and the journal keeps it as ``paused``. Resuming the parent starts
each such sub-agent again, as a new child run for the same task (the one ``spawn_agent`` call,
journaled with ``replaces``), because unlike a lost child it stopped at a known point for a reason
that is now set up, and the parent's model is still waiting for its result: the model's later
calls that name the old id reach the new one. What the paused try cost stays in the parent's
totals. A parent that ends without waiting on a sub-agent that paused during its last turn is not
paused (it did not need the result); that sub-agent's record is closed as above.

Every child run (a sub-agent started by ``spawn_agent`` and a fan-out worker alike) is a
:class:`~lev_nb.engine.runner.Runner` on the same engine loop with its own run record; the parent
keeps one :class:`ChildLink` per child. The parent's record lists its children (``children``: ids;
``child_runs``: id, kind, agent, blueprint, status), the child's names its parent
(``parent_run_id``, ``depth``). When a child ends its usage is added to the parent's under
``usage.children`` (and counted in the parent's ``cost_usd``).

A sub-agent runs beside its parent: the parent goes on, and collects the result with
``wait_for_agent`` (or ``spawn_agent`` with ``wait = true``), or holds a ``requires_children``
stage until every sub-agent it started has ended. Killing a child (``kill_agent``), cancelling the
parent, or the parent ending while a sub-agent still runs stops that sub-agent and its own
children. The depth limit (``max_child_depth``) counts levels below the run the user started: a
run at that depth may not start another agent.

A sub-agent's blueprint is an agent's name (beside this blueprint, in ``$LEV_HOME/agents``, or
bundled with lev_nb, found as fan-out workers are) or a path to an agent folder or its
agent.leviath, taken relative to this blueprint's folder and confined to it; a path into the
run's working directory is refused, since the model may have written it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from lev_nb.blueprint.constants import SUBAGENT_TOOLS
from lev_nb.engine import events as ev
from lev_nb.engine.plan.types import OutputSpec, RunPlan
from lev_nb.engine.record import PAUSE_REASONS, close_paused_child, roll_up_usage
from lev_nb.engine.state import RunPaused
from lev_nb.messages import ToolCall
from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.engine.runner import Runner
    from lev_nb.engine.state import RunState

SUBAGENT_TOOL_NAMES = frozenset(SUBAGENT_TOOLS)
DEPTH_SOURCES = {
    "default": "the built-in default",
    "configuration": "[limits] max_child_depth in the configuration",
    "blueprint": "[agent] max_child_depth in the blueprint",
    "launch": "the launch (--max-depth, or max_depth=)",
    "spawn_agent": "the max_child_depth a parent passed to spawn_agent",
}


@record(frozen=False, eq=False)
class ChildLink:
    """One child run of this run: the runner, its kind (``agent``: spawn_agent; ``worker``:
    fan_out), ``done`` (set when it has ended and its record is written), and for a sub-agent the
    asyncio task running it."""

    runner: Runner
    kind: str
    done: asyncio.Event = field(default_factory=asyncio.Event)
    future: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    task: asyncio.Task[None] | None = None
    stage: str = ""  # the parent's stage that started it (its cost is counted there)
    setup: dict[str, Any] | None = None  # a sub-agent that paused: its needs_setup
    restart: bool = False  # stopped because its parent paused: a resume starts it again

    @property
    def run_id(self) -> str:
        return self.runner.run_id

    @property
    def status(self) -> str:
        return self.runner.meta.status


class SubAgents:
    """A run's children and the sub-agent tools.

    Receives the run state, ``spawn`` (makes a child Runner of a plan; see
    :meth:`~lev_nb.engine.runner.Runner.spawn_child`), this run's ``depth`` and its depth limit
    ``max_child_depth`` with where the limit came from (``depth_source``, a key of
    DEPTH_SOURCES), ``provider`` (the launch's model, which children share) and ``tree`` (why the
    run's tree may start no sub-agent now: an ancestor is stopping, or the tree's cap is reached).
    """

    def __init__(
        self,
        state: RunState,
        *,
        spawn: Callable[..., Runner],
        depth: int,
        max_child_depth: int,
        depth_source: str,
        provider: Any,
        tree: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.state = state
        self.spawn = spawn
        self.tree = tree  # why the run's tree may start no sub-agent now (Runner.tree_spawn_refusal)
        self.depth = depth
        self.max_child_depth = max_child_depth
        self.depth_source = depth_source
        self.provider = provider
        self.links: dict[str, ChildLink] = {}
        # A resumed run's children from its previous life: id -> what check/wait_for_agent say.
        self.recalled: dict[str, str] = {}
        self.paused: ChildLink | None = None  # the first sub-agent that paused (this run pauses)
        # Sub-agents of the previous life that paused, started again once the run goes live:
        # (their id, the spawn_agent arguments, its call id, its turn).
        self._again: list[tuple[str, dict[str, Any], str, int]] = []
        self.replaced: dict[str, str] = {}  # a paused sub-agent's id -> the one started again for it

    # -- the links ---------------------------------------------------------------------------
    def adopt(self, child: Runner, kind: str) -> ChildLink:
        """Record ``child`` as a child of this run (both records, an event) and give it a Run handle."""
        from lev_nb.engine.handle import Run

        link = ChildLink(child, kind, stage=self.state.stage.name)
        self.links[child.run_id] = link
        meta = self.state.meta
        meta.children.append(child.run_id)
        meta.child_runs.append(
            {
                "run_id": child.run_id,
                "kind": kind,
                "agent_name": child.plan.agent_name,
                "blueprint": child.plan.source_path or child.plan.agent_name,
                "status": "running",  # it is started right after (and its end updates this entry)
                "error": None,
            }
        )
        handle = Run(child)
        handle.track(link.future)
        child.handle = handle
        self.state.rec.emit(
            ev.ChildStarted(
                self.state.run_id, self.state.stage.name, child_id=child.run_id, child_kind=kind,
                agent=child.plan.agent_name, task=child.state.task,
            )
        )
        return link

    def recall(self, child_id: str, call: ToolCall | None = None) -> str:
        """A resumed run replays a ``spawn_agent`` call of its previous life: take the child it
        started back into this run's record (not started again) and return what
        ``wait_for_agent`` says of it: its journaled result when it had ended, else that it was
        lost (it was still running when the process stopped; a resume does not run it again, since
        it cannot be continued from where it was)."""
        if child_id in self.recalled:
            return self.recalled[child_id]
        state, meta = self.state, self.state.meta
        ended = state.journal.child(child_id) if state.journal is not None else None
        if ended is not None and ended.get("status") == "paused":
            self._paused_before(child_id, ended)
            if call is not None and state.journal is not None:  # started again once the run is live
                args = dict(call.arguments) if isinstance(call.arguments, dict) else {}
                self._again.append((child_id, args, call.id, state.journal.turn))
            return ""
        if ended is not None:
            status, text = str(ended.get("status") or "error"), str(ended.get("text") or "")
            error = None
            roll_up_usage(state, ended.get("usage"), state.stage.name)
        else:
            status = "error"
            error = "lost: the process running it stopped, and the resumed parent does not run it again"
            text = (
                f"Sub-agent '{child_id}' finished with status: error: it was still running when lev_nb "
                "stopped, and the resumed run does not start it again. Anything it wrote to the working "
                "directory is still there; start a new sub-agent if you still need its result."
            )
        self.recalled[child_id] = text
        if child_id not in meta.children:
            meta.children.append(child_id)
            meta.child_runs.append({"run_id": child_id, "kind": "agent", "agent_name": None, "blueprint": None,
                                    "status": status, "error": error})
        return text

    def _paused_before(self, child_id: str, ended: dict[str, Any]) -> None:
        """A sub-agent of the previous life paused: it cost what it cost, and the record lists it."""
        state, meta = self.state, self.state.meta
        roll_up_usage(state, ended.get("usage"), state.stage.name)
        if child_id not in meta.children:
            meta.children.append(child_id)
            meta.child_runs.append({"run_id": child_id, "kind": "agent", "agent_name": None, "blueprint": None,
                                    "status": "cancelled", "error": "paused; started again when this run was resumed"})

    def child_ended(self, child: Runner) -> None:
        """Called (on the engine loop) when a child's run has ended and its record is written."""
        link = self.links.get(child.run_id)
        if link is None:
            return
        state, meta = self.state, self.state.meta
        child_meta = child.meta
        journaled = child_meta.status
        if link.kind == "agent" and child_meta.status == "paused":
            # Never resumed on its own (as a fan-out worker): this run pauses, and its resume
            # starts the sub-agent again. Its record ends here, saying so.
            link.setup = dict(child_meta.needs_setup or {})
            close_paused_child(child.state, f"paused ({_what_paused(link.setup)}); its parent run {state.run_id} "
                               "pauses too and starts this sub-agent again for the same task when it is resumed")
            if self.paused is None:
                self.paused = link
        if link.kind == "agent" and (link.setup is not None or link.restart):
            journaled = "paused"
        child.state.usage.settle(child_meta)
        if link.kind == "agent" and state.journal is not None:  # a resume recalls it from here
            state.journal.record_child(child.run_id, journaled, result_text(link),
                                       child_meta.usage.get("total"))
        for entry in meta.child_runs:
            if entry["run_id"] == child.run_id:
                entry["status"] = child_meta.status
                entry["error"] = child_meta.error
                break
        if link.kind == "agent":  # a fan-out counts its workers itself (journaled for a resume)
            roll_up_usage(state, child_meta.usage.get("total"), link.stage or None)
        state.rec.emit(
            ev.ChildEnded(
                state.run_id, state.stage.name, child_id=child.run_id, child_kind=link.kind,
                status=child_meta.status, error=child_meta.error,
            )
        )
        # What a child was told changes what this run gets: the person hears it here (the same
        # warning from many workers is told once).
        who = "a fan-out worker" if link.kind == "worker" else f"sub-agent '{child_meta.agent_name}'"
        for told in list(child_meta.warnings):
            if not meta.finished:
                state.warn(f"{who}: {told.get('message')}", str(told.get("code") or "warning"))
        if not meta.finished:
            state.rec.save()
        link.done.set()
        if not link.future.done():
            link.future.set_result(None)

    def handles(self) -> list[Any]:
        """The Run handles of every child, in start order."""
        return [link.runner.handle for link in list(self.links.values())]  # read from other threads too

    def running_agents(self) -> list[ChildLink]:
        """Sub-agents (not workers) of this run that have not ended."""
        return [link for link in self.links.values() if link.kind == "agent" and not link.done.is_set()]

    def check_paused(self) -> None:
        """Raise RunPaused when a sub-agent of this run paused: this run cannot go on without it."""
        link = self.paused
        if link is None:
            return
        state = self.state
        setup = link.setup or {}
        remedy = str(setup.get("remedy") or "set up what the sub-agent's record says")
        raise RunPaused(
            f"paused in stage '{state.stage.name}': sub-agent '{link.run_id}' ({link.runner.plan.agent_name}) "
            f"paused because {_what_paused(setup)}. To continue: {remedy}, then `lev resume {state.run_id}` "
            f"(or lev_nb.resume(\"{state.run_id}\")); the sub-agent then starts again for the same task.",
            str(setup.get("blocker") or "providers"), remedy,
        )

    def start_again(self) -> None:
        """The resumed run went live: start again, for the same task, each sub-agent of its previous
        life that paused (or was stopped when it paused); later calls naming it reach the new one."""
        again, self._again = self._again, []
        for old_id, args, call_id, turn in again:
            started = self._launch({**args, "wait": False}, call_id, turn=turn, replaces=old_id)
            if isinstance(started, str):  # it cannot start now (its blueprint changed): say so
                self.recalled[old_id] = (
                    f"Sub-agent '{old_id}' finished with status: error: it paused, and when this run was "
                    f"resumed it could not be started again: {started}"
                )
                self.state.warn(f"sub-agent '{old_id}' paused and could not be started again: {started}", "subagent-lost")

    def _current(self, agent_id: str) -> str:
        """The id a model's ``agent_id`` stands for now: a paused sub-agent's is its replacement's."""
        journal = self.state.journal
        for _ in range(100):  # each resume may have replaced it once more
            nxt = self.replaced.get(agent_id) or (journal.replacement(agent_id) if journal is not None else None)
            if nxt is None:
                break
            agent_id = nxt
        return agent_id

    def find(self, run_id: str) -> ChildLink | None:
        """The link to ``run_id`` anywhere in this run's subtree."""
        link = self.links.get(run_id)
        if link is not None:
            return link
        for child in self.links.values():
            found = child.runner.subagents.find(run_id)
            if found is not None:
                return found
        return None

    # -- holds and endings -------------------------------------------------------------------
    async def await_children(self) -> None:
        """The ``requires_children`` hold: wait (without polling) until every sub-agent this run
        started has ended; the record says what the run waits on meanwhile."""
        live = self.running_agents()
        if not live:
            return
        state = self.state
        state.meta.waiting_on = {"reason": "children", "outstanding": len(live)}
        state.rec.save(force=True)
        await state.rec.flushed()  # on disk before anyone hears of it (lev ps shows the wait)
        state.rec.emit(ev.ChildrenAwaited(state.run_id, state.stage.name, outstanding=len(live)))
        try:
            await asyncio.gather(*(link.done.wait() for link in live))
        finally:
            state.meta.waiting_on = None
        state.rec.save(force=True)
        self.check_paused()

    async def stop_all(self, ending_status: str) -> None:
        """Stop every sub-agent still running (the run is ending) and wait until each has ended."""
        live = self.running_agents()
        if not live:
            return
        for link in live:
            if ending_status == "paused":  # this run pauses: its resume starts them again
                link.restart = True
            elif ending_status != "cancelled":
                self.state.warn(
                    f"sub-agent '{link.run_id}' was still running when this run ended, so it was stopped",
                    "subagent-lost",
                )
            link.runner.request_cancel()
        await asyncio.gather(*(link.done.wait() for link in live))

    # -- the tools ---------------------------------------------------------------------------
    async def call(self, call: ToolCall, canonical: str) -> str:
        """Answer one call of a sub-agent tool (``canonical`` is its name)."""
        args = call.arguments if isinstance(call.arguments, dict) else {}
        self.check_paused()
        journal = self.state.journal
        if canonical == "spawn_agent":
            earlier = journal.spawned(call) if journal is not None else None
            ended = journal.child(earlier) if journal is not None and earlier is not None else None
            if earlier is not None and ended is not None and ended.get("status") == "paused":
                # It paused (and this call paused the run): start it again for the same task.
                self._paused_before(earlier, ended)
                return await self.spawn_agent(args, call.id, replaces=earlier)
            if earlier is not None:  # started before the run was resumed: never a second one
                return self.recall(earlier)
            return await self.spawn_agent(args, call.id)
        agent_id = args.get("agent_id")
        if not isinstance(agent_id, str) or not agent_id:
            return f"[error] {canonical} needs 'agent_id': the id spawn_agent returned"
        agent_id = self._current(agent_id)
        if agent_id == self.state.run_id:
            return f"[error] {canonical}: '{agent_id}' is this run itself; name one of the sub-agents it started"
        link = self.find(agent_id)
        if link is None and agent_id in self.recalled:
            if canonical in ("check_agent", "wait_for_agent"):
                return self.recalled[agent_id]
            if canonical == "kill_agent":
                return f"Sub-agent '{agent_id}' had already ended (before this run was resumed)."
            return f"[error] sub-agent '{agent_id}' has already ended (before this run was resumed); nothing reaches it now"
        if link is None:
            return f"[error] no sub-agent '{agent_id}' was started by this run{self._known()}"
        if canonical == "check_agent":
            self.check_paused()
            return check_text(link)
        if canonical == "wait_for_agent":
            await link.done.wait()
            self.check_paused()
            return result_text(link)
        if canonical == "send_to_agent":
            return self._send(link, args)
        if canonical == "kill_agent":
            return await self._kill(link)
        return f"[error] {canonical}: this tool is not a sub-agent tool"

    def _known(self) -> str:
        ids = [link.run_id for link in self.links.values() if link.kind == "agent"]
        return f" (its sub-agents: {', '.join(ids)})" if ids else " (it has started none)"

    async def spawn_agent(self, args: dict[str, Any], call_id: str = "", *, replaces: str | None = None) -> str:
        """``spawn_agent{blueprint, task, wait?, seed_context?, max_child_depth?, output_format?,
        output_instructions?}``: start a sub-agent; its id, or with ``wait`` its result.
        ``replaces``: the paused sub-agent of a previous life this one is started again for."""
        started = self._launch(args, call_id, replaces=replaces)
        if isinstance(started, str):
            return started
        link = started
        if args.get("wait") is True:
            await link.done.wait()
            self.check_paused()
            return result_text(link)
        return (
            f"Spawned sub-agent '{link.run_id}' ({link.runner.plan.agent_name}). It runs beside you: collect its "
            "result with wait_for_agent (or look with check_agent) using this id."
        )

    def _launch(self, args: dict[str, Any], call_id: str, *, turn: int | None = None,
                replaces: str | None = None) -> ChildLink | str:
        """Start the sub-agent ``args`` asks for (journaled first); its link, or an ``[error]`` text."""
        blueprint, task = args.get("blueprint"), args.get("task")
        if not isinstance(blueprint, str) or not blueprint.strip() or not isinstance(task, str) or not task.strip():
            return "[error] spawn_agent needs 'blueprint' (an agent's name or a path to its folder) and 'task'"
        child_depth = self.depth + 1
        if child_depth > self.max_child_depth:
            return depth_refusal(self.max_child_depth, self.depth, self.depth_source)
        resolved = self._child_plan(blueprint.strip())
        if isinstance(resolved, str):
            return resolved
        plan = resolved
        seed = args.get("seed_context")
        if isinstance(seed, str) and seed.strip():
            task = f"{task}\n\nContext:\n{seed}"
        fmt, instructions = args.get("output_format"), args.get("output_instructions")
        request = None
        if isinstance(fmt, str) and fmt or isinstance(instructions, str) and instructions:
            request = OutputSpec(
                format=fmt if isinstance(fmt, str) and fmt else None,
                instructions=instructions if isinstance(instructions, str) and instructions else None,
            )
        refusal = self._launch_refusal(plan, task, request)
        if isinstance(refusal, str):
            return refusal
        validators = refusal
        refused = self.tree()  # the last check: it counts the sub-agent when it may start
        if refused is not None:
            return refused
        limit, source = self.max_child_depth, self.depth_source
        wanted = args.get("max_child_depth")
        if isinstance(wanted, int) and not isinstance(wanted, bool) and 0 <= wanted < limit:
            limit, source = wanted, "spawn_agent"  # a parent may tighten its children's limit, never loosen it
        child = self.spawn(
            plan, plan.entry, task, kind="agent", output_request=request, validators=validators,
            max_child_depth=(limit, source),
        )
        link = self.links[child.run_id]
        if replaces is not None:
            self.replaced[replaces] = child.run_id
        if self.state.journal is not None:  # before it starts: a resume never starts it twice
            self.state.journal.record_spawn(call_id, child.run_id, turn=turn, replaces=replaces)
        link.task = asyncio.get_running_loop().create_task(child.main())
        return link

    def _child_plan(self, blueprint: str) -> RunPlan | str:
        """The plan of the sub-agent ``blueprint`` names, or an ``[error]`` text."""
        from lev_nb.blueprint import BlueprintError, load
        from lev_nb.engine.pipeline.fanout import find_agent
        from lev_nb.engine.prepare import cached_plan
        from lev_nb.workspace import PathEscape, confine

        plan = self.state.plan
        looks_like_path = (
            any(sep in blueprint for sep in ("/", "\\"))
            or blueprint.endswith((".leviath", ".toml"))
            or blueprint in (".", "..")
        )
        if looks_like_path:
            if not plan.base_dir:
                return (
                    f"[error] spawn_agent: '{blueprint}' is a path, but this agent was loaded from text "
                    "and has no folder to take it from; name an agent instead"
                )
            try:
                target = confine(plan.base_dir, blueprint)
            except (PathEscape, OSError):
                return (
                    f"[error] spawn_agent: '{blueprint}' leads outside this agent's folder; a sub-agent's "
                    "blueprint must be inside it (a relative path starts there), or name an agent"
                )
            if _inside(self.state.workdir, target):
                return (
                    f"[error] spawn_agent: '{blueprint}' is inside the run's working directory, where a model "
                    "may have written it, so it is not run; use an agent shipped beside this one"
                )
            if not target.exists():
                return f"[error] spawn_agent: there is no agent at '{blueprint}' in this agent's folder"
        else:
            try:
                target = find_agent(plan, blueprint, workdir=self.state.workdir)
            except LookupError as exc:
                return f"[error] spawn_agent: {exc}"
        try:
            return cached_plan(load(target))
        except BlueprintError as exc:
            return f"[error] spawn_agent: the blueprint '{blueprint}' does not load: {exc}"

    def _launch_refusal(self, plan: RunPlan, task: str, request: OutputSpec | None) -> dict[str, Any] | str:
        """The run-start checks for a sub-agent (its task, inputs, formats, keys) and its compiled
        validators; an ``[error]`` text when it cannot start as asked."""
        from lev_nb.engine.launch import LaunchError, check_launch
        from lev_nb.engine.prepare import compile_validators
        from lev_nb.scripting import ScriptError

        try:
            check_launch(
                plan, task=task, model=self.provider,
                output_format=request.format if request is not None else None,
                settings=self.state.settings,
            )
            return compile_validators(plan)
        except LaunchError as exc:
            return f"[error] spawn_agent: the sub-agent cannot start: {exc.message}"
        except (ScriptError, ValueError) as exc:
            return f"[error] spawn_agent: the sub-agent cannot start: {exc}"

    def _send(self, link: ChildLink, args: dict[str, Any]) -> str:
        message = args.get("message")
        if not isinstance(message, str) or not message.strip():
            return "[error] send_to_agent needs 'message': the text to send"
        if link.done.is_set():
            return f"[error] sub-agent '{link.run_id}' has already ended ({link.status}); nothing reaches it now"
        region = args.get("target_region")
        link.runner.interaction.send(message, source="parent", region=region if isinstance(region, str) and region else None)
        return (
            f"Message sent to sub-agent '{link.run_id}'. It reads it before its next model turn, in a stage "
            "that accepts messages."
        )

    async def _kill(self, link: ChildLink) -> str:
        if link.kind != "agent":
            return f"[error] '{link.run_id}' is a fan-out worker; it ends with the fan_out call that started it"
        if link.done.is_set():
            return f"Sub-agent '{link.run_id}' had already ended (status: {link.status})."
        link.runner.request_cancel()
        await link.done.wait()
        return f"Sub-agent '{link.run_id}' was stopped (status: {link.status}), with any sub-agents of its own."


def _inside(root: Path, target: Path) -> bool:
    """Whether ``target`` lies inside ``root`` (the one confinement rule decides)."""
    from lev_nb.workspace import PathEscape, confine

    try:
        confine(root, target)
    except (PathEscape, OSError):
        return False
    return True


def _what_paused(setup: dict[str, Any]) -> str:
    """Why a child paused, from its needs_setup."""
    return PAUSE_REASONS.get(str(setup.get("blocker") or ""), "it needs something set up")


def depth_refusal(limit: int, depth: int, source: str) -> str:
    """The tool error for a spawn past the depth limit."""
    where = DEPTH_SOURCES.get(source, source)
    if limit == 0:
        level = "no sub-agents are allowed at all"
    else:
        level = f"this run is already {depth} level{'s' if depth != 1 else ''} below the run that was started"
    return (
        f"[error] sub-agent depth limit ({limit}) reached: {level}, so it may not start another agent "
        f"(the limit comes from {where}). Do this part of the work yourself."
    )


def check_text(link: ChildLink) -> str:
    """check_agent's answer: the child's status, with its result once it has ended."""
    if link.done.is_set():
        return result_text(link)
    meta = link.runner.meta
    stage = f" in stage '{meta.current_stage}'" if meta.current_stage else ""
    turns = meta.iteration
    waiting = " (waiting for its own sub-agents)" if meta.waiting_on else ""
    return (
        f"Sub-agent '{link.run_id}' status: {meta.status}{stage}, {turns} model turn{'s' if turns != 1 else ''} "
        f"so far{waiting}."
    )


def result_text(link: ChildLink) -> str:
    """A finished child's status and its final output (or its last words when it submitted none)."""
    runner = link.runner
    meta = runner.meta
    status = meta.status if meta.status != "error" else f"error: {meta.error or 'unknown'}"
    text = f"Sub-agent '{link.run_id}' finished with status: {status}"
    output = runner.final_output
    if output is not None:
        text += f"\n\n--- its final output ({output.format or 'text'}) ---\n{output.content}"
        if output.truncated:
            text += "\n[the answer was cut at the size limit]"
        return text
    last = runner.progress.last_text.strip()
    if last:
        return text + f"\n\n[it submitted no final output; its last message was:]\n{last}"
    return text + "\n\n[it produced no final output]"


