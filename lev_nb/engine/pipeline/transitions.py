"""Taking the next step when a stage ends, and entering a stage (docs/concepts.md#transitions):
condition edges, normal resolution, the routing call, gates, transforms, then entering the target.

The decisions themselves are pure functions (:mod:`~lev_nb.engine.pipeline.routing`,
:mod:`~lev_nb.engine.pipeline.gates`); :class:`Transitions` applies them to the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from lev_nb.engine import events as ev
from lev_nb.engine.context.window import StageInstructionsError
from lev_nb.engine.pipeline.gates import gate_block_message
from lev_nb.engine.pipeline.outputs import OWED_OUTPUT_PROMPT, describe_spec
from lev_nb.engine.pipeline.routing import find_conditioned, match_choice, resolve_normal, routing_prompt
from lev_nb.engine.pipeline.watchdogs import error_note
from lev_nb.engine.plan.types import EdgePlan, OutputSpec, StagePlan
from lev_nb.engine.state import Ending, Outcome, RunFailure, StageProgress

if TYPE_CHECKING:
    from lev_nb.engine.pipeline.compaction import Compactor
    from lev_nb.engine.pipeline.inference import Inference
    from lev_nb.engine.state import RunState

OWED_AT_END = (
    "the run finished without the final output it requires: the stage that owes one never called "
    "submit_output"
)


class Transitions:
    """Resolves and takes transitions, and enters stages.

    Receives the run state, the run's :class:`~lev_nb.engine.pipeline.inference.Inference` (for
    the routing call), ``output_spec`` (the final-output spec in force for a stage, which the
    stage's instructions describe when it owes one) and the run's
    :class:`~lev_nb.engine.pipeline.compaction.Compactor` (summaries an edge transform asks for).
    """

    def __init__(
        self,
        state: RunState,
        inference: Inference,
        output_spec: Callable[[StagePlan], OutputSpec | None],
        compactor: Compactor | None = None,
    ) -> None:
        self.state = state
        self.inference = inference
        self.output_spec = output_spec
        self.compactor = compactor

    # -- entering a stage -------------------------------------------------------------------------
    def enter(self, name: str, from_stage: str | None) -> None:
        """Make ``name`` the current stage: fresh counters, its layout and instructions, the record."""
        state = self.state
        stage = state.plan.stage(name)
        state.stage = stage
        state.visits[name] = state.visits.get(name, 0) + 1
        state.progress = StageProgress()
        state.ctx.enter_stage(stage)
        prompt = stage.system_prompt or ""
        spec = self.output_spec(stage)
        if stage.require_output and spec is not None and not spec.is_empty():
            prompt = (prompt + "\n\n" if prompt else "") + OWED_OUTPUT_PROMPT + "\n\n" + describe_spec(spec)
        elif stage.require_output:
            prompt = (prompt + "\n\n" if prompt else "") + OWED_OUTPUT_PROMPT
        try:
            state.ctx.set_stage_instructions(stage.name, prompt or None)
        except StageInstructionsError as err:
            raise RunFailure(str(err)) from err
        for edge in stage.transitions or ():
            region = edge.gate.require_region_updated if edge.gate else None
            if region and state.ctx.has_region(region):
                state.progress.digests[region] = state.ctx.digest(region)
        meta = state.meta
        meta.current_stage = name
        meta.stage_index = stage.index
        meta.stage_history.append(name)
        state.rec.emit(ev.StageEntered(state.run_id, name, visit=state.visits[name], from_stage=from_stage))
        state.rec.save(force=True)
        state.enter_hook_pending = True  # on_stage_enter fires before the stage's first inference

    def move(self, target: str, condition: str, transform: str, reason: str) -> None:
        """Record the transition and enter ``target``."""
        state = self.state
        state.rec.emit(
            ev.Transition(
                state.run_id, state.stage.name, target=target, condition=condition, transform=transform, reason=reason
            )
        )
        self.enter(target, state.stage.name)

    # -- resolving where the stage goes -----------------------------------------------------------
    async def resolve(self, outcome: Outcome | None) -> Ending | None:
        """Decide and take the next step; the run's Ending when the run is over, else None."""
        state = self.state
        plan, stage, visits = state.plan, state.stage, state.visits
        if outcome is not None and outcome.kind == "error":
            edge = find_conditioned(plan, stage, visits, "error") or find_conditioned(plan, stage, visits, "dead_end")
            if edge is None:
                return Ending("error", outcome.message)
            state.ctx.note("error_report", error_note(stage.name, outcome.message))
            await self._take(edge, outcome.message)
            return None
        if outcome is not None and outcome.kind == "stuck":
            edge = find_conditioned(plan, stage, visits, "stuck")
            if edge is not None:
                await self._take(edge, outcome.message)
            return None
        if outcome is not None and outcome.kind == "max_iterations":
            edge = find_conditioned(plan, stage, visits, "max_iterations")
            if edge is not None:
                await self._take(edge, "the stage reached its iteration cap")
                return None
        resolution = resolve_normal(plan, stage, visits)
        if resolution.kind == "fallthrough":
            self.move(plan.stages[stage.index + 1].name, "always", "direct", "")
            return None
        if resolution.kind == "terminal":
            return self._complete_run()
        if resolution.kind == "dead_end":
            return await self._dead_end()
        if resolution.kind == "next":
            assert resolution.edge is not None
            await self._take_gated(resolution.edge)
            return None
        return await self._route(resolution.choices)

    def _complete_run(self) -> Ending:
        """The run ends complete. One that owes a final output and never submitted it still
        completes (a missing output never strands a run), with ``output_forced`` recorded and a
        warning that reaches the person."""
        state = self.state
        if state.plan.owes_output_from(state.entry) and state.final_output is None:
            flags = state.meta.flags
            if flags.output_forced == 0:  # a stage already forced past its output has said so
                flags.output_forced += 1
                refused = state.rejection_summary()
                why = f"{OWED_AT_END}: {refused}" if refused else OWED_AT_END
                state.warn(why + "; it completes with output_forced set", "output-forced")
        return Ending("complete")

    async def _dead_end(self) -> Ending | None:
        state = self.state
        plan, stage, visits = state.plan, state.stage, state.visits
        message = (
            f"stage '{stage.name}' dead-ended: every stage it can move to has used up its "
            "max_revisits before an output or terminal stage was reached"
        )
        edge = find_conditioned(plan, stage, visits, "dead_end") or find_conditioned(plan, stage, visits, "error")
        if edge is None:
            return Ending("error", message)
        state.ctx.note("error_report", error_note(stage.name, message))
        await self._take(edge, message)
        return None

    async def _route(self, choices: tuple[EdgePlan, ...]) -> Ending | None:
        state = self.state
        stage = state.stage
        state.ctx.add_user(routing_prompt(stage, choices))
        response = await self.inference.routing_turn([e.target for e in choices], stage.allow_complete)
        if isinstance(response, Outcome):
            return await self.resolve(response)
        answer = response.text.strip()
        state.ctx.add_assistant(f"Transitioning to: {answer}", [])
        picked = match_choice(answer, choices, stage.allow_complete)
        if picked == "DONE":
            return self._complete_run()
        if picked is None:
            if stage.allow_complete:
                return self._complete_run()
            picked = choices[0]
            state.warn(f"the routing answer {answer[:80]!r} named no stage; taking '{picked.target}'", "route-guessed")
        assert isinstance(picked, EdgePlan)
        await self._take_gated(picked)
        return None

    # -- taking an edge ---------------------------------------------------------------------------
    async def _take_gated(self, edge: EdgePlan) -> None:
        """Take a normal edge unless its gate holds the stage (then nudge and keep going)."""
        state = self.state
        gate = edge.gate
        if gate is not None:
            message = gate_block_message(gate, state.stage, state.progress, state.ctx)
            if message is not None:
                if state.progress.gate_reentries >= gate.max_attempts:
                    self._force_gate(edge, message)
                else:
                    state.progress.gate_reentries += 1
                    await state.in_context(state.ctx.nudge, message)
                    state.rec.emit(
                        ev.GateBlocked(
                            state.run_id,
                            state.stage.name,
                            target=edge.target,
                            message=message,
                            attempt=state.progress.gate_reentries,
                            max_attempts=gate.max_attempts,
                        )
                    )
                    state.rec.save()
                    return None
        await self._take(edge, "")
        return None

    def _force_gate(self, edge: EdgePlan, message: str) -> None:
        """The gate's attempts are used up: note what it still wanted, then let the edge through."""
        state = self.state
        assert edge.gate is not None
        flags = state.meta.flags
        flags.gates_forced += 1
        for region in edge.gate.require_regions:
            if state.ctx.has_region(region) and state.ctx.is_empty(region):
                if region not in flags.required_regions_abandoned:
                    flags.required_regions_abandoned.append(region)
        state.rec.emit(ev.GateForced(state.run_id, state.stage.name, target=edge.target, message=message))
        state.warn(f"the gate to '{edge.target}' ran out of attempts and let the run through anyway: {message}",
                   "gate-forced")

    async def _take(self, edge: EdgePlan, reason: str) -> None:
        """Apply the edge's transform to the stage being left (summaries included), then move."""
        result = self.state.ctx.transform(edge.transform, edge.transform_config)  # empties regions; runs no script
        if self.compactor is not None:
            await self.compactor.after_transform(result, edge.transform_config)
        elif result.to_summarise:
            self.state.warn(f"no summariser: these regions were carried as they are: {', '.join(result.to_summarise)}",
                            "context-kept")
        self.move(edge.target, edge.condition, edge.transform, reason)
