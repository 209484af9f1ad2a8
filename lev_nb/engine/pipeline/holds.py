"""Holding a stage open while it owes something (docs/concepts.md#nudges-and-holds): the text-only nudge,
required regions, the owed final output and a fan-out stage that never fanned out. The stage's
interaction points come after these (lev_nb.engine.pipeline.points)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lev_nb.blueprint.constants import DEFAULT_FAN_OUT_ATTEMPTS
from lev_nb.engine.state import Outcome
from lev_nb.messages import ModelResponse

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState

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
FAN_OUT_NUDGE = (
    "This stage has not started its workers yet. Call `fan_out` with the work items "
    "(an empty `items` array if there is nothing to split)."
)


class ExitHolds:
    """The checks run before a stage may leave; receives only the run state."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    async def nudge_text_only(self, response: ModelResponse) -> bool:
        """Nudge a stage that answered in text before using any tool; True when nudged."""
        state = self.state
        stage, progress = state.stage, state.progress
        progress.last_text = response.text
        enabled, maximum, template = stage.nudge.resolve(state.settings.nudge)
        if progress.total_tool_calls > 0 or not enabled:
            return False
        if progress.text_only_nudges >= maximum:
            if progress.text_only_nudges:
                state.warn(f"stage '{stage.name}' still answered in text without using a tool after "
                           f"{_times(progress.text_only_nudges)} nudged, and went on as it was", "nudges-exhausted")
            return False
        progress.text_only_nudges += 1
        await state.in_context(state.ctx.add_assistant, response.text, [])
        text = template.replace("{stage}", stage.name).replace(
            "{regions}", ", ".join(state.ctx.required_regions())
        )
        await state.nudge("text_only", text)
        return True

    async def hold(self, outcome: Outcome | None) -> bool:
        """Keep the stage running while it owes something; True when it must go on."""
        state = self.state
        stage, progress, flags, ctx = state.stage, state.progress, state.meta.flags, state.ctx
        abandoned = flags.required_regions_abandoned
        abandoned[:] = [r for r in abandoned if not ctx.has_content(r)]
        if outcome is None and set(stage.tools) & CONTEXT_WRITERS:
            unmet = unmet_required_regions(state)
            if unmet:
                cap = stage.max_revisits if stage.max_revisits is not None else REQUIRED_REENTRY_CAP
                if progress.required_reentries < cap:
                    progress.required_reentries += 1
                    for region in unmet:
                        template = ctx.required_message(region) or REQUIRED_REGION_NUDGE
                        await state.nudge("required_region", template.replace("{region}", region))
                    return True
                for region in unmet:
                    if region not in abandoned:
                        abandoned.append(region)
                    state.warn(f"the required region '{region}' was still empty after {_times(progress.required_reentries)} "
                               f"nudged, and stage '{stage.name}' went on without it", "nudges-exhausted")
        if stage.require_output and not self._has_output_from(stage.name):
            if outcome is None and progress.output_reentries < OUTPUT_REENTRY_CAP:
                progress.output_reentries += 1
                await state.nudge("required_output", OWED_OUTPUT_NUDGE)
                return True
            flags.output_forced += 1
            n = progress.output_reentries
            why = (f"after {n} reminder{'s' if n != 1 else ''} to call submit_output" if outcome is None
                   else f"when it stopped ({outcome.kind.replace('_', ' ')})")
            refused = state.rejection_summary()  # every answer refused: by what, how often, why
            state.warn(f"stage '{stage.name}' left without the final output it owes, {why}"
                       + (f"; {refused}" if refused else ""), "output-forced")
        if stage.mode == "fan_out" and not progress.fanned_out:
            cap = stage.fan_out.max_attempts if stage.fan_out else DEFAULT_FAN_OUT_ATTEMPTS
            if outcome is None and progress.fan_out_reentries < cap:
                progress.fan_out_reentries += 1
                await state.nudge("fan_out", FAN_OUT_NUDGE)
                return True
            flags.splits_degraded += 1
            if progress.fan_out_reentries:
                state.warn(f"stage '{stage.name}' never called fan_out (nudged {_times(progress.fan_out_reentries)}), "
                           "so no workers ran", "nudges-exhausted")
            await state.in_context(
                ctx.note,
                "error_report",
                f"[Fan-out in stage '{stage.name}' started no workers] the stage never called "
                "`fan_out`, so no workers ran and nothing was merged.",
            )
        return False

    def _has_output_from(self, stage: str) -> bool:
        output = self.state.final_output
        return output is not None and output.stage == stage


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def unmet_required_regions(state: RunState) -> list[str]:
    """The visible required regions that are still empty (caller-seeded ones are the caller's)."""
    caller_seeded = set(state.plan.caller_regions) | set(state.inputs)
    return [r for r in state.ctx.required_regions() if r not in caller_seeded and state.ctx.is_empty(r)]
