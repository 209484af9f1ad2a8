"""Watchdogs that end a stage the model will not end itself (docs/concepts.md#watchdogs): the iteration
cap, the stuck thresholds of a ``stuck`` edge and a working directory that went away.

The deciders (:func:`iteration_cap_hit`, :func:`stuck_reason`) and the notes are pure;
:func:`check_watchdogs` applies them to the run before each inference.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from lev_nb.engine import events as ev
from lev_nb.engine.pipeline.routing import find_conditioned
from lev_nb.engine.plan.types import EdgePlan, StagePlan
from lev_nb.engine.state import Outcome, StageProgress

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState

# The workdir is checked every this many inferences of a stage.
WORKSPACE_CHECK_INTERVAL = 5


def check_watchdogs(state: RunState) -> Outcome | None:
    """Stop the current stage when a watchdog trips (recording why), else None."""
    stage, progress = state.stage, state.progress
    cap = iteration_cap(stage, state.settings.limits.default_max_iterations)
    if iteration_cap_hit(stage, progress, cap):
        state.meta.flags.max_iterations_hit += 1
        state.rec.emit(ev.MaxIterationsHit(state.run_id, stage.name, limit=cap))
        state.ctx.note("error_report", iteration_cap_note(stage.name, cap))
        return Outcome("max_iterations")
    if not progress.stuck_fired:
        edge = find_conditioned(state.plan, stage, state.visits, "stuck")
        if edge is not None:
            reason = stuck_reason(edge, progress)
            if reason is not None:
                progress.stuck_fired = True
                state.rec.emit(ev.Stuck(state.run_id, stage.name, reason=reason))
                state.ctx.note("stuck_report", stuck_note(stage.name, reason))
                return Outcome("stuck", reason)
    if progress.iterations and progress.iterations % WORKSPACE_CHECK_INTERVAL == 0:
        if not os.path.isdir(state.workdir):  # os.path's, not pathlib's: one C call
            state.meta.flags.workspace_lost = True
            return Outcome("error", f"the working directory '{state.workdir}' is no longer accessible")
    return None


def iteration_cap(stage: StagePlan, default: int) -> int:
    """The inferences ``stage`` may make: its own max_iterations, else ``default`` ([limits]
    default_max_iterations); 0 means unlimited."""
    return stage.max_iterations if stage.max_iterations is not None else default


def iteration_cap_hit(stage: StagePlan, progress: StageProgress, cap: int) -> bool:
    """True when a (non fan-out) stage has used all ``cap`` inferences it is allowed (0: no cap)."""
    if stage.mode == "fan_out":
        return False
    return cap > 0 and progress.iterations >= cap


def stuck_reason(edge: EdgePlan, progress: StageProgress, now: float | None = None) -> str | None:
    """The first stuck threshold of ``edge`` that has tripped, as a sentence, or None."""
    limit = edge.stuck_after_same_file_edits
    if limit and progress.edits_by_path:
        # Hottest path; ties go to the alphabetically first path so the report is stable.
        path, count = min(progress.edits_by_path.items(), key=lambda kv: (-kv[1], kv[0]))
        if count >= limit:
            return (
                f"you have written or edited '{path}' {count} times in this stage without "
                "finishing it - the problem is very likely not in that file"
            )
    limit = edge.stuck_after_iterations
    if limit and progress.iterations >= limit:
        return f"you have run {progress.iterations} model turns in this stage without finishing it"
    limit = edge.stuck_after_tool_calls
    if limit and progress.total_tool_calls >= limit:
        return f"you have made {progress.total_tool_calls} tool calls in this stage without finishing it"
    minutes = edge.stuck_after_minutes
    if minutes:
        elapsed = (now if now is not None else time.monotonic()) - progress.started_at
        if elapsed >= minutes * 60:
            return f"you have spent {int(elapsed // 60)} minutes in this stage without finishing it"
    return None


def stuck_note(stage: str, reason: str) -> str:
    """The note a stuck edge leaves for the stage it leads to."""
    return (
        f"[Stuck in stage '{stage}'] {reason}. Stop repeating what you have been doing. Re-read the "
        "original task, separate what you have verified from what you assumed, and try a "
        "different approach - including undoing changes that made things worse."
    )


def iteration_cap_note(stage: str, cap: int) -> str:
    """The note left when a stage is cut off at its iteration cap."""
    return (
        f"[Stage '{stage}' reached its iteration cap ({cap})] It was stopped before it said it was "
        "finished, so treat what it produced as possibly incomplete and check it before relying on it."
    )


def error_note(stage: str, message: str) -> str:
    """The note an error edge carries to the stage it leads to."""
    return (
        f"[Error in stage '{stage}'] {message}. Work out what went wrong from this message before "
        "retrying or working around it."
    )
