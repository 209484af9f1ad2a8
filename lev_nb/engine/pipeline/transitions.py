"""Taking the next step when a stage ends (spec/runtime.md §6): condition edges, normal resolution,
the routing call, gates, transforms and entering the next stage's neighbour."""

from __future__ import annotations

from lev_nb.engine import events as ev
from lev_nb.engine.pipeline.gates import gate_block_message
from lev_nb.engine.plan.types import EdgePlan
from lev_nb.engine.state import Outcome
from lev_nb.engine.pipeline.routing import find_conditioned, match_choice, resolve_normal, routing_prompt
from lev_nb.engine.pipeline.watchdogs import error_note
from lev_nb.providers.base import ProviderError

OWED_AT_END = (
    "the run finished without the final output it requires: the stage that owes one never called "
    "submit_output"
)


class Transitions:
    """Mixed into :class:`~lev_nb.engine.runner.Runner`: resolving and taking transitions."""

    async def _resolve(self, outcome: Outcome | None) -> bool:
        """Decide and take the next step; True when the run is over."""
        stage = self.stage
        if outcome is not None and outcome.kind == "error":
            edge = find_conditioned(self.plan, stage, self.visits, "error") or find_conditioned(
                self.plan, stage, self.visits, "dead_end"
            )
            if edge is None:
                self._finish("error", outcome.message)
                return True
            self.ctx.note("error_report", error_note(stage.name, outcome.message))
            self._take(edge, outcome.message)
            return False
        if outcome is not None and outcome.kind == "stuck":
            edge = find_conditioned(self.plan, stage, self.visits, "stuck")
            if edge is not None:
                self._take(edge, outcome.message)
            return False
        if outcome is not None and outcome.kind == "max_iterations":
            edge = find_conditioned(self.plan, stage, self.visits, "max_iterations")
            if edge is not None:
                self._take(edge, "the stage reached its iteration cap")
                return False
        resolution = resolve_normal(self.plan, stage, self.visits)
        if resolution.kind == "fallthrough":
            self._move(self.plan.stages[stage.index + 1].name, "always", "direct", "")
            return False
        if resolution.kind == "terminal":
            return self._complete_run()
        if resolution.kind == "dead_end":
            return self._dead_end()
        if resolution.kind == "next":
            assert resolution.edge is not None
            return self._take_gated(resolution.edge)
        return await self._route(resolution.choices)

    def _complete_run(self) -> bool:
        if self.plan.owes_output_from(self.entry) and self.final_output is None:
            self._finish("error", OWED_AT_END)
        else:
            self._finish("complete")
        return True

    def _dead_end(self) -> bool:
        stage = self.stage
        message = (
            f"stage '{stage.name}' dead-ended: every stage it can move to has used up its "
            "max_revisits before an output or terminal stage was reached"
        )
        edge = find_conditioned(self.plan, stage, self.visits, "dead_end") or find_conditioned(
            self.plan, stage, self.visits, "error"
        )
        if edge is None:
            self._finish("error", message)
            return True
        self.ctx.note("error_report", error_note(stage.name, message))
        self._take(edge, message)
        return False

    async def _route(self, choices: tuple[EdgePlan, ...]) -> bool:
        stage = self.stage
        prompt = routing_prompt(stage, choices)
        self.ctx.add_user(prompt)
        request, provider = self._request(
            "routing",
            choices=[e.target for e in choices],
            allow_done=stage.allow_complete,
            temperature=0.0,
            max_tokens=256,
        )
        try:
            response = await self._complete(request, provider)
        except ProviderError as exc:
            self._record_call(request, None, error=exc.message)
            return await self._resolve(self._inference_failed(exc.message))
        self._record_call(request, response)
        answer = response.text.strip()
        self.ctx.add_assistant(f"Transitioning to: {answer}", [])
        picked = match_choice(answer, choices, stage.allow_complete)
        if picked == "DONE":
            return self._complete_run()
        if picked is None:
            if stage.allow_complete:
                return self._complete_run()
            picked = choices[0]
            self.rec.emit(
                ev.Warning_(
                    self.run_id,
                    stage.name,
                    message=f"the routing answer {answer[:80]!r} named no stage; taking '{picked.target}'",
                )
            )
        assert isinstance(picked, EdgePlan)
        return self._take_gated(picked)

    def _take_gated(self, edge: EdgePlan) -> bool:
        """Take a normal edge unless its gate holds the stage (then nudge and keep going)."""
        gate = edge.gate
        if gate is not None:
            message = gate_block_message(gate, self.stage, self.progress, self.ctx)
            if message is not None:
                if self.progress.gate_reentries >= gate.max_attempts:
                    flags = self.meta.flags
                    flags.gates_forced += 1
                    for region in gate.require_regions:
                        if self.ctx.has_region(region) and self.ctx.is_empty(region):
                            if region not in flags.required_regions_abandoned:
                                flags.required_regions_abandoned.append(region)
                    self.rec.emit(ev.GateForced(self.run_id, self.stage.name, target=edge.target, message=message))
                else:
                    self.progress.gate_reentries += 1
                    self.ctx.nudge(message)
                    self.rec.emit(
                        ev.GateBlocked(
                            self.run_id,
                            self.stage.name,
                            target=edge.target,
                            message=message,
                            attempt=self.progress.gate_reentries,
                            max_attempts=gate.max_attempts,
                        )
                    )
                    self.rec.save()
                    return False
        self._take(edge, "")
        return False

    def _take(self, edge: EdgePlan, reason: str) -> None:
        pending = self.ctx.transform(edge.transform, edge.transform_config)
        if pending:
            self.rec.emit(
                ev.Warning_(
                    self.run_id,
                    self.stage.name,
                    message="compaction by a model is not available yet, so these regions were "
                    f"carried as they are: {', '.join(pending)}",
                )
            )
        self._move(edge.target, edge.condition, edge.transform, reason)

    def _move(self, target: str, condition: str, transform: str, reason: str) -> None:
        self.rec.emit(
            ev.Transition(
                self.run_id, self.stage.name, target=target, condition=condition, transform=transform, reason=reason
            )
        )
        self._enter_stage(target, self.stage.name)
