"""Fan-out: a stage splits its work into items, a worker run handles each, and the results are
merged into one report (docs/concepts.md#sub-agents-and-fan-out).

Workers are child runs on the same engine loop, each with its own run record (``parent_run_id``
points back). A ``worker_stage`` worker runs this blueprint entered at that stage; a
``worker_agent`` worker runs another blueprint found beside this one, in ``$LEV_HOME/agents``, or
among the agents bundled with lev_nb.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from lev_nb.blueprint.constants import MANIFEST_NAME
from lev_nb.engine import events as ev
from lev_nb.engine.plan.types import FanOutPlan, RunPlan
from lev_nb.engine.record import PAUSE_REASONS, close_paused_child, roll_up_usage
from lev_nb.engine.state import RunPaused
from lev_nb.messages import ToolCall
from lev_nb.records import record
from lev_nb.text import cut_text_marked

if TYPE_CHECKING:
    from lev_nb.engine.runner import Runner
    from lev_nb.engine.state import RunState

DEFAULT_REPORT_BYTES = 4000


@record(frozen=False)
class WorkerResult:
    """What one worker brought back."""

    item_id: str
    ok: bool
    text: str
    run_id: str = ""
    usage: dict[str, Any] | None = None  # the worker run's usage totals (meta.json usage.total)
    setup: dict[str, Any] | None = None  # a paused worker's needs_setup (blocker, remedy, reason)

    def to_json(self) -> dict[str, Any]:
        """The result as journal data."""
        return {"item_id": self.item_id, "ok": self.ok, "text": self.text, "run_id": self.run_id, "usage": self.usage}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerResult:
        """A journaled result, rebuilt."""
        return cls(str(data.get("item_id")), bool(data.get("ok")), str(data.get("text") or ""),
                   str(data.get("run_id") or ""), data.get("usage"))


def parse_items(arguments: Any) -> list[dict[str, Any]] | str:
    """The work items of a fan_out call, or an ``[error]`` text saying what is wrong."""
    if not isinstance(arguments, dict):
        return "[error] fan_out needs an object with an `items` array"
    items = arguments.get("items")
    if not isinstance(items, list):
        return "[error] fan_out requires an `items` array of {id, context} objects"
    parsed = []
    for n, item in enumerate(items):
        if not isinstance(item, dict) or "id" not in item:
            return f"[error] fan_out item {n} must be an object with an `id` (and a `context` object)"
        context = item.get("context", {})
        if not isinstance(context, dict):
            return f"[error] fan_out item {n}: `context` must be an object"
        parsed.append({"id": str(item["id"]), "context": context})
    return parsed


def worker_task(item: dict[str, Any]) -> str:
    """The task text a worker run starts with."""
    return f"Work item id: {item['id']}\nContext: {json.dumps(item['context'], ensure_ascii=False)}"


def build_report(results: list[WorkerResult], region_tokens: int | None) -> str:
    """The merged report of every worker, each answer bounded so the whole fits its region."""
    good = [r for r in results if r.ok]
    bad = [r for r in results if not r.ok]
    if region_tokens:
        bound = max(200, int(region_tokens * 4 * 0.9) // max(1, len(good)))
    else:
        bound = DEFAULT_REPORT_BYTES
    sections: list[str] = []
    cut_any = False
    for result in good:
        text, cut = cut_text_marked(result.text, bound)
        if cut:
            cut_any = True
            text += "\n[...cut short; the worker's own run has the whole answer]"
        sections.append(f"\n## worker {result.item_id}\n{text}\n")
    for result in bad:
        sections.append(f"\n## worker {result.item_id} FAILED\n{result.text}\n")
    head = f"[fan_out results: {len(good)} succeeded, {len(bad)} failed]\n"
    if cut_any:
        head += f"[each worker's answer is shown up to {bound} bytes; read a worker's own run for the rest]\n"
    return head + "".join(sections)


class FanOut:
    """Answers a stage's ``fan_out`` calls by running worker runs.

    Receives the run state, ``spawn`` (makes a worker run of a plan, entered at a stage, with a
    task), this run's ``depth`` in the tree of workers and the tree's ``max_child_depth``. What a
    batch asked the run loop to do afterwards is taken with :meth:`take_failure` and
    :meth:`take_merge`.
    """

    def __init__(
        self,
        state: RunState,
        *,
        spawn: Callable[[RunPlan, str, str], Runner],
        depth: int,
        max_child_depth: int,
    ) -> None:
        self.state = state
        self.spawn = spawn
        self.depth = depth
        self.max_child_depth = max_child_depth
        self._failure: str | None = None
        self._merge: str | None = None

    def take_failure(self) -> str | None:
        """The message to fail the stage with after this batch (cleared once taken), if any."""
        failure, self._failure = self._failure, None
        return failure

    def take_merge(self) -> str | None:
        """After this batch: the merge stage to move to, ``""`` to resolve the fan-out stage's own
        edges, or None when no fan-out finished (cleared once taken)."""
        merge, self._merge = self._merge, None
        return merge

    async def run(self, call: ToolCall) -> str:
        """Run the workers of one fan_out call and deliver their report."""
        state = self.state
        stage = state.stage
        items = parse_items(call.arguments)
        if isinstance(items, str):
            return items
        config = stage.fan_out or FanOutPlan()
        from_stage = stage.fan_out is not None
        max_workers = call.arguments.get("max_workers", config.max_workers)
        if not isinstance(max_workers, int) or max_workers < 0:
            max_workers = config.max_workers
        if config.max_items and len(items) > config.max_items:
            items = items[: config.max_items]
        agent = call.arguments.get("agent")
        try:
            plan, entry = self._worker_plan(config, agent if isinstance(agent, str) else None)
        except (LookupError, ValueError) as exc:  # ValueError: a worker blueprint that does not load
            return f"[error] fan_out: {exc}"
        state.progress.fanned_out = True  # only once workers can really start
        state.rec.emit(ev.FanOutStarted(state.run_id, stage.name, workers=len(items)))
        journal = state.journal
        recorded = journal.replay_fan_out(call) if journal is not None else None
        if recorded is not None:  # a resumed run: the workers ran in its previous life
            results = [WorkerResult.from_json(w) for w in recorded]
            for result in results:
                if result.run_id:
                    state.meta.children.append(result.run_id)
                if result.usage:
                    roll_up_usage(state, result.usage, stage.name)
        else:
            # Workers of an earlier try that paused (see below) cost what they cost.
            for usage in journal.spent(call) if journal is not None else []:
                roll_up_usage(state, usage, stage.name)
            results = await self._run_workers(plan, entry, items, max_workers)
            paused = [r for r in results if r.setup is not None]
            if paused:
                self._pause(call, results, paused[0])
            if journal is not None:
                journal.record_fan_out(call, [r.to_json() for r in results])
        failures = [r for r in results if not r.ok]
        state.rec.emit(
            ev.FanOutFinished(
                state.run_id,
                stage.name,
                succeeded=len(results) - len(failures),
                failed=len(failures),
                children=[r.run_id for r in results if r.run_id],
            )
        )
        if not items:
            state.meta.flags.splits_degraded += 1
        region = config.results_region if from_stage else "conversation"
        region_tokens = state.ctx.region(region).max_tokens if state.ctx.has_region(region) else None
        report = build_report(results, region_tokens)
        if failures and config.on_worker_failure == "fail_all" and from_stage:
            self._failure = f"fan_out: {len(failures)} worker(s) failed (on_worker_failure = \"fail_all\")"
            return report
        if not from_stage:
            return report
        if state.ctx.has_region(region) and region != "conversation":
            state.ctx.seed(region, report)
        else:
            state.ctx.add_user(report)
        self._merge = config.merge_stage or ""
        return (
            f"{len(results) - len(failures)} worker(s) finished and {len(failures)} failed; their merged "
            f"report is in the '{region}' region."
        )

    def _pause(self, call: ToolCall, results: list[WorkerResult], first: WorkerResult) -> None:
        """A worker paused (out of credits, a provider out of reach): so does this run, and a
        resume starts the fan-out's workers again (what the paused try cost is journaled)."""
        state = self.state
        if state.journal is not None:
            state.journal.record_spent(call, [r.usage for r in results if r.usage])
        setup = first.setup or {}
        remedy = setup.get("remedy") or "set up what the worker's record says"
        raise RunPaused(
            f"paused in stage '{state.stage.name}': fan-out worker '{first.item_id}' (run {first.run_id}) "
            f"cannot go on: {first.text}. To continue: {remedy}, then `lev resume {state.run_id}` "
            f"(or lev_nb.resume(\"{state.run_id}\")); the fan-out then starts its workers again.",
            str(setup.get("blocker") or "providers"), remedy,
        )

    def _worker_plan(self, config: FanOutPlan, agent: str | None) -> tuple[RunPlan, str]:
        plan = self.state.plan
        name = agent or config.worker_agent
        if name is None and config.worker_query is not None:
            name = _find_agent_by_query(plan, config.worker_query)
        if name is None:
            if config.worker_stage is None:
                raise LookupError("the stage names no worker (worker_stage, worker_agent or worker_query)")
            return plan, config.worker_stage
        from lev_nb.blueprint import load
        from lev_nb.engine.plan.build import plan_from_blueprint

        # A name from the call is the model's choice: never an agent in the working directory.
        workdir = self.state.workdir if agent else None
        worker = plan_from_blueprint(load(find_agent(plan, name, workdir=workdir)))
        return worker, worker.entry

    async def _run_workers(
        self, plan: RunPlan, entry: str, items: list[dict[str, Any]], max_workers: int
    ) -> list[WorkerResult]:
        limit = asyncio.Semaphore(max_workers if max_workers > 0 else max(1, len(items)))

        async def one(item: dict[str, Any]) -> WorkerResult:
            async with limit:
                depth_limit = self.max_child_depth
                if self.depth + 1 > depth_limit:
                    return WorkerResult(
                        item["id"], False, f"sub-agent depth limit ({depth_limit}) reached; not starting a deeper worker"
                    )
                child = self.spawn(plan, entry, worker_task(item))
                await child.main()
                result = _worker_outcome(item["id"], child.state)
                if result.setup is not None:
                    # A worker is never resumed on its own: its parent pauses, and its resume
                    # starts a new worker. This one's record ends here, saying so.
                    close_paused_child(child.state, f"paused ({result.text}); its parent run {self.state.run_id} "
                                       "paused too and starts a new worker when it is resumed")
                child.state.usage.settle(child.state.meta)
                result.usage = child.state.meta.usage.get("total")
                if result.usage:
                    roll_up_usage(self.state, result.usage, stage)
                return result

        stage = self.state.stage.name

        return list(await asyncio.gather(*(one(item) for item in items)))


def _agent_dirs(plan: RunPlan) -> list[Path]:
    """Beside this blueprint (and its parent folder), then the search path of agents by name."""
    from lev_nb.catalog import agent_search_dirs  # importlib.resources: only for a fan-out

    base = Path(plan.base_dir) if plan.base_dir else None
    dirs = [base, base.parent] if base is not None else []
    return dirs + [folder for _, folder in agent_search_dirs()]


def find_agent(plan: RunPlan, name: str, *, workdir: Path | None = None) -> Path:
    """The agent.leviath of the agent ``name``: beside this blueprint (or in its parent folder), in
    ``$LEV_HOME/agents``, the configuration's ``agent_paths``, or bundled with lev_nb; LookupError
    when none has that name.

    ``name`` is a name, never a path (``/tmp/x`` or ``../x`` would reach any folder on the disk).
    When a model chose the name (``spawn_agent``, the ``agent`` of a ``fan_out`` call), pass the
    run's ``workdir``: an agent found there, where the model may have written it, is passed over.
    """
    from lev_nb.workspace import PathEscape, confine

    if not name or name in (".", "..") or any(c in name for c in ("/", "\\", "\x00")):
        raise LookupError(
            f"'{name}' is not an agent's name (a name has no '/', '\\' or '..'); name an agent beside this "
            "blueprint, in $LEV_HOME/agents or bundled with lev_nb"
        )
    in_workdir = None
    for folder in _agent_dirs(plan):
        candidate = folder / name / MANIFEST_NAME
        if not candidate.is_file():
            continue
        if workdir is not None:
            try:
                confine(workdir, candidate)
            except (PathEscape, OSError):
                return candidate  # outside the working directory: not the model's own writing
            in_workdir = candidate
            continue
        return candidate
    if in_workdir is not None:
        raise LookupError(
            f"the agent '{name}' is inside the run's working directory ({in_workdir.parent}), where a model "
            "may have written it, so it is not run; use an agent shipped beside this one or installed"
        )
    raise LookupError(
        f"no agent named '{name}' was found beside this blueprint, in $LEV_HOME/agents or among the "
        "agents bundled with lev_nb"
    )


def _find_agent_by_query(plan: RunPlan, query: str) -> str | None:
    needle = query.lower()
    for folder in _agent_dirs(plan):
        if not folder.is_dir():
            continue
        for child in sorted(folder.iterdir()):
            if (child / MANIFEST_NAME).is_file() and needle in child.name.lower():
                return child.name
    return None


def _worker_outcome(item_id: str, child: RunState) -> WorkerResult:
    status = child.meta.status
    if status == "complete":
        if child.final_output is not None:
            return WorkerResult(item_id, True, child.final_output.content, child.run_id)
        if child.stage.require_output:
            return WorkerResult(
                item_id, False, "the worker finished without the final output its stage requires", child.run_id
            )
        return WorkerResult(item_id, True, child.progress.last_text, child.run_id)
    if status == "cancelled":
        return WorkerResult(item_id, False, "worker cancelled", child.run_id)
    if status == "paused":
        setup = dict(child.meta.needs_setup or {})
        why = PAUSE_REASONS.get(setup.get("blocker", ""), "it paused")
        return WorkerResult(item_id, False, why, child.run_id, setup=setup)
    return WorkerResult(item_id, False, child.meta.error or "worker failed", child.run_id)
