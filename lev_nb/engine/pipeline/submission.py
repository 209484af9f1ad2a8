"""Checking a ``submit_output`` call, in the upstream order (docs/concepts.md#final-outputs).

A refusal is returned as the tool result (``[error] ...``), nothing is recorded and the previous
answer stays. A broken Rhai validator never blocks an answer: the submission is accepted unchecked
and a warning says why.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.engine.plan.types import OutputSpec
from lev_nb.records import record
from lev_nb.store import utc_now
from lev_nb.engine.pipeline.outputs import (
    FinalOutput,
    artifacts_outside,
    cap_content,
    check_schema,
    check_well_formed,
)

RECORDED = "Recorded as this run's final output."
TRUNCATED_TAIL = (
    " It was longer than the 256 KiB limit and was cut short; submit a shorter answer, or write "
    "the long form to a file, list it in `artifacts` and summarise it here."
)


@record(frozen=False)
class SubmissionResult:
    """The tool result text, the accepted output (None when refused) and any warnings; a refusal
    also says which check refused (``rejected_by``: "validator 'validators/x.rhai'", "the output
    schema", ...) and why (``reason``, without the ``[error]`` framing)."""

    text: str
    output: FinalOutput | None = None
    warnings: list[str] = field(default_factory=list)
    rejected_by: str = "the submission checks"
    reason: str = ""

    @property
    def accepted(self) -> bool:
        """True when the submission became the run's final output."""
        return self.output is not None


def evaluate_submission(
    arguments: dict[str, Any],
    *,
    spec: OutputSpec | None,
    stage: str,
    stage_names: list[str],
    workdir: Path,
    validator: Any | None = None,
) -> SubmissionResult:
    """Run every check on a submit_output call and build the result."""
    content = arguments.get("content")
    if not isinstance(content, str):
        return SubmissionResult("[error] missing 'content' argument: put your answer in `content`")
    if not content.strip():
        return SubmissionResult(
            "[error] the final output is empty - submit the answer itself, not a placeholder"
        )
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: no file or reader takes it
        return SubmissionResult(
            "[error] the final output contains an invalid character (an unpaired UTF-16 surrogate); "
            "submit it again as plain UTF-8 text"
        )
    lowered = content.strip().lower()
    for name in stage_names:
        if lowered == name.lower():
            return SubmissionResult(
                f"[error] '{name}' is the name of a stage in this agent, not an answer. Submit the "
                "answer itself; stages are chosen when the stage ends, not through submit_output."
            )
    fmt = spec.format if spec else None
    reason = check_well_formed(fmt, content)
    if reason is not None:
        label = (fmt or "").strip()
        return SubmissionResult(f"[error] the final output is not valid {label}: {reason}",
                                rejected_by=f"the {label} format check", reason=f"not valid {label}: {reason}")
    warnings: list[str] = []
    if spec and spec.schema:
        refusal, warning = check_schema(spec.schema, content)
        if warning:
            warnings.append(warning)
        if refusal:
            return SubmissionResult(
                f"[error] the final output does not match the declared schema: {refusal}", None, warnings,
                rejected_by="the output schema", reason=refusal,
            )
    checked = True
    if validator is not None:
        verdict = validator.check(content)
        verdict_kind = type(verdict).__name__.lower()
        if verdict_kind == "invalid":
            return SubmissionResult(
                f"[error] the final output was rejected: {verdict.reason}", None, warnings,
                rejected_by=f"validator '{spec.validator}'" if spec and spec.validator else "the output validator",
                reason=str(verdict.reason),
            )
        if verdict_kind == "unusable":
            checked = False
            warnings.append(
                f"the output validator could not judge this answer, so it was accepted unchecked: "
                f"{verdict.message}"
            )
    raw_artifacts = arguments.get("artifacts") or []
    artifacts = [a for a in raw_artifacts if isinstance(a, str) and a.strip()]
    outside = artifacts_outside(workdir, artifacts)
    if outside:
        return SubmissionResult(
            "[error] these artifact paths do not resolve inside the working directory: "
            + ", ".join(outside),
            None,
            warnings,
            rejected_by="the artifact check",
            reason="artifact paths outside the working directory: " + ", ".join(outside),
        )
    kept, truncated = cap_content(content)
    output = FinalOutput(
        content=kept,
        format=fmt,
        stage=stage,
        submitted_at=utc_now(),
        truncated=truncated,
        artifacts=artifacts,
        checked=checked,
    )
    return SubmissionResult(RECORDED + (TRUNCATED_TAIL if truncated else ""), output, warnings)
