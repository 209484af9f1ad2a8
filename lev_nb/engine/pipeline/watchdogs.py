"""Watchdogs that end a stage the model will not end itself (spec/runtime.md §7)."""

from __future__ import annotations

import time

from lev_nb.engine.plan.types import EdgePlan, StagePlan
from lev_nb.engine.state import StageProgress


def iteration_cap_hit(stage: StagePlan, progress: StageProgress) -> bool:
    """True when a (non fan-out) stage has used all the inferences it is allowed."""
    if stage.mode == "fan_out":
        return False
    cap = stage.max_iterations or 0
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
    limit = edge.stuck_after_minutes
    if limit:
        elapsed = (now if now is not None else time.monotonic()) - progress.started_at
        if elapsed >= limit * 60:
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
