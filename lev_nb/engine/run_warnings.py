"""What a run tells the person: its warnings, one line each, and their codes.

Anything that changes what a run produced or did without stopping it is told through ONE door,
:meth:`lev_nb.engine.state.RunState.warn`. It keeps the warning once (a repeat of the same code,
message and stage is not told again), appends it to meta.json ``warnings`` (saved at once, with
the record's atomic write) and emits a ``warning`` event carrying the code, which is how the warning reaches the person live: ``lev run``
prints it on stderr, the notebook run view shows it as a call-out above the stages, and
``run.warnings`` returns the records.

meta.json ``warnings`` is a list, in the order told, of
``{"code": <kebab-case code>, "message": <one sentence>, "stage": <stage or null>, "at": <ISO time>}``.

The codes (:data:`WARNING_CODES`):

``unchecked-answer``
    a validator or the output schema could not judge an answer, so it was accepted unchecked
``tool-denied-unattended``
    a tool that needs a person's approval was denied because nobody could be asked (``--allow TOOL``)
``question-unanswered``
    the agent asked a person (ask_user_*, present_for_review, edit_document) and nobody could answer
``checkpoint-unattended``
    a checkpoint passed without a person (auto-approved, or nobody answered in time)
``run-stopped-by-person``
    the person stopped the run at a checkpoint
``gate-forced``
    a gate ran out of attempts and let the run move on anyway
``output-forced``
    a stage that owes the final output left without it
``nudges-exhausted``
    the model was nudged as often as allowed and the stage went on without what it was nudged for
``sandbox-fallback``
    commands ran with less isolation than the blueprint asked for (``on_unavailable = "warn"``)
``tool-unavailable``
    a stage lists a script tool this machine cannot offer (its ``@requires``: no search key...)
``seed-failed``
    a region's seed could not fill it (a command failed, a file could not be read, a tool failed)
``input-ignored``
    a launch input fills no region of the blueprint
``model-fallback``
    a stage runs on another model than its first choice
``output-unconstrained``
    the model's server would not hold the final answer to its schema, so it was asked without
    (the answer is still checked against the schema)
``route-guessed``
    the routing answer named no stage, so the run took the first edge
``context-kept``
    context that should have been summarised or transformed was kept as it was
``subagent-lost``
    a sub-agent was stopped with its parent, or could not be started again on resume
``message-undelivered``
    messages sent to the run never reached the model
``inbox-unreadable``
    something left in the run's inbox (``lev respond``, ``lev msg``) could not be taken
``resume-changed``
    something the resumed run depends on changed since it started
``script-failed``
    a region script or an ``on_complete`` callback failed, and the run went on without it
``webhook-failed``
    the completion webhook could not be delivered
``taint-gate-denied``
    the taint gate stopped data leaving through a tool not cleared for it, and nobody could be asked
``taint-gate-waived``
    ``--yolo`` let data leave through a tool not cleared for it
``policy-rule-failed``
    a taint policy rule (or the policy file) could not be used, so it allowed nothing
``write-refused``
    a write was refused, or a command's redirects wrote past a cap (``[limits]
    max_tool_call_write_bytes``, ``max_run_write_bytes``, or less than 1 GiB left free on the disk)
``title-failed``
    the model ``[title]`` names could not write the run's title, so the run has none (told only when
    ``[title]`` is in the configuration)
``wrong-type``
    the blueprint writes a value of the wrong type (``max_iterations = "ten"``), which the run reads
    as not set (``lev validate`` names the same)
``internal-error``
    a bug in lev_nb (the message is its traceback)
``warning``
    anything else (the default code)
"""

from __future__ import annotations

from typing import Any

from lev_nb.records import record

__all__ = ["RunWarning", "WARNING_CODES", "DEFAULT_CODE", "warnings_of"]

#: Every warning code, with what it means (the codes are a contract: ``lev show``, tests and
#: scripts reading meta.json match on them).
WARNING_CODES: dict[str, str] = {
    "unchecked-answer": "a validator or the output schema could not judge an answer, so it was accepted unchecked",
    "tool-denied-unattended": "a tool that needs a person's approval was denied because nobody could be asked",
    "question-unanswered": "the agent asked a person and nobody could answer",
    "checkpoint-unattended": "a checkpoint passed without a person",
    "run-stopped-by-person": "the person stopped the run at a checkpoint",
    "gate-forced": "a gate ran out of attempts and let the run move on anyway",
    "output-forced": "a stage that owes the final output left without it",
    "nudges-exhausted": "the model was nudged as often as allowed and the stage went on without what it was nudged for",
    "sandbox-fallback": "commands ran with less isolation than the blueprint asked for",
    "tool-unavailable": "a stage lists a script tool this machine cannot offer",
    "seed-failed": "a region's seed could not fill it",
    "input-ignored": "a launch input fills no region of the blueprint",
    "model-fallback": "a stage runs on another model than its first choice",
    "output-unconstrained": "the model's server would not hold the final answer to its schema, so it was asked without",
    "route-guessed": "the routing answer named no stage, so the run took the first edge",
    "context-kept": "context that should have been summarised or transformed was kept as it was",
    "subagent-lost": "a sub-agent was stopped with its parent, or could not be started again on resume",
    "message-undelivered": "messages sent to the run never reached the model",
    "inbox-unreadable": "something left in the run's inbox could not be taken",
    "resume-changed": "something the resumed run depends on changed since it started",
    "script-failed": "a region script or an on_complete callback failed, and the run went on without it",
    "webhook-failed": "the completion webhook could not be delivered",
    "taint-gate-denied": "the taint gate refused to let data leave through a tool not cleared for it, and nobody could be asked",
    "taint-gate-waived": "--yolo let data leave through a tool not cleared for it",
    "policy-rule-failed": "a taint policy rule or the policy file could not be used, so it allowed nothing",
    "write-refused": "a write was refused by a [limits] write cap or the free-disk guard",
    "title-failed": "the configured [title] model could not title the run, so it has none",
    "wrong-type": "the blueprint writes a value of the wrong type, which the run reads as not set",
    "internal-error": "a bug in lev_nb (the message is its traceback)",
    "warning": "something else the run survived",
}
DEFAULT_CODE = "warning"


@record
class RunWarning:
    """One thing a run told the person: ``code`` (a key of :data:`WARNING_CODES`), ``message``
    (one sentence), ``stage`` (where it happened; None: before any stage) and ``at`` (when, as an
    ISO 8601 UTC time)."""

    code: str
    message: str
    stage: str | None
    at: str

    def to_dict(self) -> dict[str, Any]:
        """The meta.json entry."""
        return {"code": self.code, "message": self.message, "stage": self.stage, "at": self.at}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunWarning:
        """A meta.json entry as a record (a field another version left out reads as empty)."""
        stage = data.get("stage")
        return cls(
            code=str(data.get("code") or DEFAULT_CODE),
            message=str(data.get("message") or ""),
            stage=stage if isinstance(stage, str) else None,
            at=str(data.get("at") or ""),
        )

    def __str__(self) -> str:
        where = f"[{self.stage}] " if self.stage else ""
        return f"{where}{self.message} ({self.code})"


def warnings_of(meta: dict[str, Any]) -> list[RunWarning]:
    """The warnings of a run record (a meta.json dict), as records; entries that are not objects
    (a damaged record) are left out."""
    entries = meta.get("warnings")
    if not isinstance(entries, list):
        return []
    return [RunWarning.from_dict(e) for e in entries if isinstance(e, dict)]
