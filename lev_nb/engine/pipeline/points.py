"""The checkpoints of an ``interactive_points`` stage (docs/runs.md#a-person-in-the-loop): when the stage
tries
to leave, each interaction point in order shows the stage's answer to a person and acts on what
they pick.

- an ``abort_options`` entry ends the run as cancelled;
- an ``edit_options`` entry asks for the edited text, tells the model to adopt it, and shows the
  point again (no new model call);
- a ``directives`` key tells the model the directive and runs the stage again;
- anything else approves: the label is told to the model and the next point comes.

Answers are matched exactly, then with dashes folded and whitespace collapsed. Revision rounds are
capped at :data:`MAX_REVISION_ROUNDS` per point, then the point passes. A ``document_region``
holds the answer being reviewed (marked as the person's after an edit).

With nobody to ask, an ``auto_approve`` point passes (also under ``--yolo``) and an ``ask`` point
ends the run in error. A point nobody answered within the interaction timeout passes, unless it
is ``unattended = "ask"``: then the run stops rather than approve it unread.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lev_nb.engine.interaction import match_option
from lev_nb.engine.plan.types import PointPlan
from lev_nb.engine.state import Outcome, RunFailure

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState

MAX_REVISION_ROUNDS = 4
REVISED_MARK = "[revised by user - keep these changes]\n"


class InteractionPoints:
    """The checkpoint hold of a stage; receives only the run state (its hub asks the person)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    async def hold(self, outcome: Outcome | None) -> bool:
        """Present the stage's remaining points; True when the stage must run again (a directive)."""
        state = self.state
        stage, progress = state.stage, state.progress
        if not stage.interaction_points or progress.points_done or outcome is not None:
            return False
        while progress.point_cursor < len(stage.interaction_points):
            point = stage.interaction_points[progress.point_cursor]
            if await self._present(point):
                progress.point_body = None  # the new answer replaces any edit
                return True
            progress.point_cursor += 1
            progress.point_rounds = 0
        progress.points_done = True
        return False

    def _unattended(self, point: PointPlan) -> bool:
        """Nobody answers the point's next request (and a resumed run's journal holds no answer
        to it, which it would replay): True when it passes on its own; RunFailure when it may not."""
        state = self.state
        hub, progress = state.interaction, state.progress
        journal = state.journal
        replayed = journal is not None and journal.answered(f"{state.run_id}-point-{point.name}-{progress.point_rounds}")
        unattended = hub is None or not hub.interactive or (state.meta.yolo and point.unattended == "auto_approve")
        if not unattended or replayed:
            return False
        if point.unattended == "ask":
            raise RunFailure(
                f"checkpoint '{point.name}' of stage '{state.stage.name}' asks a person to approve it, and this "
                "run has nobody to ask; set unattended = \"auto_approve\" on it to let it pass, or "
                "run it where somebody can answer (a notebook, or lev run at a terminal)"
            )
        state.warn(f"checkpoint '{point.name}' approved without a person (unattended = auto_approve)",
                   "checkpoint-unattended")
        return True

    async def _present(self, point: PointPlan) -> bool:
        """Show one point until it is approved (False) or a directive sends the stage back (True)."""
        state = self.state
        hub, progress, ctx = state.interaction, state.progress, state.ctx
        while True:
            if self._unattended(point):
                return False
            body = progress.point_body if progress.point_body is not None else progress.last_text
            if point.document_region and ctx.has_region(point.document_region):
                mark = REVISED_MARK if progress.point_body is not None else ""
                await state.in_context(ctx.replace_with_summary, point.document_region, mark + body)
            options = point.options or (("Yes", "No") if point.style == "confirm" else ())
            labels = tuple(dict.fromkeys(  # each label once, in order
                options + tuple(k for k, _ in point.directives) + point.edit_options + point.abort_options
            ))
            request = hub.request(
                "checkpoint", f"{state.run_id}-point-{point.name}", str(progress.point_rounds),
                prompt=point.prompt, options=labels, document=body, point=point.name,
                roles=tuple(_role(label, point) for label in labels),
            )
            answer = await hub.ask(request)  # a journaled answer is replayed, whoever can answer now
            if answer.outcome in ("timed_out", "cancelled"):
                if point.unattended == "ask":
                    raise RunFailure(
                        f"checkpoint '{point.name}' went unanswered within the interaction timeout; the run "
                        "stopped rather than approving it unread"
                    )
                state.warn(f"checkpoint '{point.name}' passed: nobody answered within the interaction timeout",
                           "checkpoint-unattended")
                return False
            if answer.outcome == "declined":
                state.warn(f"the person declined checkpoint '{point.name}', so the run stops", "run-stopped-by-person")
                raise asyncio.CancelledError
            label = answer.value or ""
            if _matches(label, point.abort_options):
                state.warn(f"the person chose '{label}' at checkpoint '{point.name}', which stops the run",
                           "run-stopped-by-person")
                raise asyncio.CancelledError
            revisable = progress.point_rounds < MAX_REVISION_ROUNDS
            if _matches(label, point.edit_options) and revisable:
                edit = await hub.ask(hub.request(
                    "edit", request.id, "edit", prompt=f"Edit the text for checkpoint '{point.name}'", document=body,
                ))
                progress.point_rounds += 1
                if edit.outcome == "answered" and edit.value is not None and edit.value != body:
                    progress.point_body = edit.value
                    ctx.add_user(
                        f"User [{point.name}] edited the output directly. Adopt this exact text as your "
                        f"output, keeping the user's changes:\n{edit.value}"
                    )
                continue
            directive = next((text for key, text in point.directives if _matches(label, (key,))), None)
            if directive is not None and revisable:
                progress.point_rounds += 1
                ctx.add_user(f"User [{point.name}] {label}")
                ctx.add_user(f"User [{point.name}] directive: {directive}")
                return True
            if label:
                ctx.add_user(f"User [{point.name}] {label}")
            if progress.point_rounds > 0:
                ctx.add_user(
                    f"User [{point.name}] approved it after it was revised: the approved version is the "
                    "latest one, including the user's changes."
                )
            return False


def _role(label: str, point: PointPlan) -> str:
    """What choosing ``label`` does, by the rules :meth:`InteractionPoints.hold` applies."""
    if _matches(label, point.abort_options):
        return "end"
    if _matches(label, point.edit_options):
        return "edit"
    if any(_matches(label, (key,)) for key, _ in point.directives):
        return "revise"
    return "approve"


def _matches(label: str, options: tuple[str, ...]) -> bool:
    """Whether ``label`` names one of ``options`` (the same rule answers are checked by)."""
    return match_option(options, label) is not None
