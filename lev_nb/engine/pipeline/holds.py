"""Holding a stage open while it owes something (spec/runtime.md §5): the text-only nudge, required
regions, the owed final output and a fan-out stage that never fanned out."""

from __future__ import annotations

from lev_nb.engine import events as ev
from lev_nb.engine.plan.types import StagePlan
from lev_nb.engine.state import Outcome, RunFailure
from lev_nb.messages import ModelResponse

OUTPUT_REENTRY_CAP = 3
REQUIRED_REENTRY_CAP = 3
CONTEXT_WRITERS = frozenset({"context_write", "context_append"})

OWED_OUTPUT_NUDGE = (
    "This stage is not finished: you have not called `submit_output`. Files and context you wrote "
    "are not what the caller receives - only the final output is. Call `submit_output` now with "
    "your answer."
)
REQUIRED_REGION_NUDGE = (
    "The required context region '{region}' is still empty. Fill it (for example with "
    "context_write, region=\"{region}\") before this stage can finish."
)


class ExitHolds:
    """Mixed into :class:`~lev_nb.engine.runner.Runner`: the checks run before a stage may leave."""

    def _nudge_text_only(self, response: ModelResponse) -> bool:
        """Nudge a stage that answered in text before using any tool; True when nudged."""
        stage, progress = self.stage, self.progress
        progress.last_text = response.text
        nudge = stage.nudge
        if progress.total_tool_calls > 0 or not nudge.enabled or progress.text_only_nudges >= nudge.max:
            return False
        progress.text_only_nudges += 1
        self.ctx.add_assistant(response.text, [])
        text = nudge.text.replace("{stage}", stage.name).replace(
            "{regions}", ", ".join(self.ctx.required_regions())
        )
        self._nudge("text_only", text)
        return True

    def _nudge(self, reason: str, text: str) -> None:
        self.ctx.nudge(text)
        self.rec.emit(ev.Nudge(self.run_id, self.stage.name, reason=reason, text=text))

    def _exit_hold(self, outcome: Outcome | None) -> bool:
        """Keep the stage running while it owes something; True when it must go on."""
        stage, progress, flags = self.stage, self.progress, self.meta.flags
        abandoned = flags.required_regions_abandoned
        abandoned[:] = [r for r in abandoned if not self.ctx.has_content(r)]
        if outcome is None and set(stage.tools) & CONTEXT_WRITERS:
            unmet = [
                r for r in self.ctx.required_regions() if r not in self._caller_seeded() and self.ctx.is_empty(r)
            ]
            if unmet:
                cap = stage.max_revisits if stage.max_revisits is not None else REQUIRED_REENTRY_CAP
                if progress.required_reentries < cap:
                    progress.required_reentries += 1
                    for region in unmet:
                        template = self.ctx.required_message(region) or REQUIRED_REGION_NUDGE
                        self._nudge("required_region", template.replace("{region}", region))
                    return True
                for region in unmet:
                    if region not in abandoned:
                        abandoned.append(region)
        if stage.require_output and not self._has_output_from(stage.name):
            if outcome is None and progress.output_reentries < OUTPUT_REENTRY_CAP:
                progress.output_reentries += 1
                self._nudge("required_output", OWED_OUTPUT_NUDGE)
                return True
            flags.output_forced += 1
            self.rec.emit(
                ev.Warning_(
                    self.run_id,
                    stage.name,
                    message=f"stage '{stage.name}' is leaving without the final output it owes",
                )
            )
        if stage.mode == "fan_out" and not progress.fanned_out:
            cap = stage.fan_out.max_attempts if stage.fan_out else 3
            if outcome is None and progress.fan_out_reentries < cap:
                progress.fan_out_reentries += 1
                self._nudge(
                    "fan_out",
                    "This stage has not started its workers yet. Call `fan_out` with the work items "
                    "(an empty `items` array if there is nothing to split).",
                )
                return True
            flags.splits_degraded += 1
            self.ctx.note(
                "error_report",
                f"[Fan-out in stage '{stage.name}' started no workers] the stage never called "
                "`fan_out`, so no workers ran and nothing was merged.",
            )
        if stage.interaction_points and not progress.points_done:
            progress.points_done = True
            self._pass_checkpoints(stage)
        return False

    def _pass_checkpoints(self, stage: StagePlan) -> None:
        """Interaction points with nobody to answer them (lev_nb runs are unattended).

        ``auto_approve`` points are approved without a prompt, as an unattended upstream run
        does; an ``ask`` point refuses to approve unread, so the run ends in error.
        """
        for name, unattended in stage.interaction_points:
            if unattended == "ask":
                raise RunFailure(
                    f"checkpoint '{name}' of stage '{stage.name}' asks a person to approve it, and this "
                    "run has nobody to ask; set unattended = \"auto_approve\" on it to let it pass"
                )
            self.rec.emit(
                ev.Warning_(
                    self.run_id, stage.name,
                    message=f"checkpoint '{name}' approved without a person (unattended = auto_approve)",
                )
            )

    def _has_output_from(self, stage: str) -> bool:
        return self.final_output is not None and self.final_output.stage == stage

    def _caller_seeded(self) -> set[str]:
        return set(self.plan.caller_regions) | set(self.inputs)
