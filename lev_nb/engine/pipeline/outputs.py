"""Final outputs (docs/concepts.md#final-outputs): resolving the spec an answer
must meet across agent, stage and launch request and describing it to the model, the checks a
submission goes through (format, schema, artifact paths), and :class:`FinalOutput`, the accepted
answer. The spec type itself is :class:`~lev_nb.engine.plan.types.OutputSpec`; the order of the
checks is :mod:`~lev_nb.engine.pipeline.submission`'s."""

from __future__ import annotations

import io
import json
import tomllib
from dataclasses import field, fields, replace
from pathlib import Path
from typing import Any

from lev_nb.blueprint.constants import MAX_FINAL_OUTPUT_BYTES
from lev_nb.engine import views
from lev_nb.engine.plan.types import OutputSpec
from lev_nb.records import record
from lev_nb.schemas import compile_schema
from lev_nb.text import cut_text_marked
from lev_nb.workspace import PathEscape, confine

FINAL_OUTPUT_REGION_TOKENS = 2000
MAX_SCHEMA_VIOLATIONS = 3

SUBMIT_OUTPUT_BASE = (
    "Submit your final answer for this run: the one thing the caller receives. Calling it again "
    "replaces what you submitted before. Put the answer itself in `content`, in full. If you "
    "produced files the caller should look at, list them in `artifacts`, as paths relative to the "
    "working directory."
)
PRESENTATION_CLAUSE = (
    "This governs how the answer is presented. Where anything else you were told says to present "
    "it differently - its length, its structure, what to lead with - follow this."
)
OWED_OUTPUT_PROMPT = (
    "Before this stage ends you must call `submit_output` with your final answer. It is the only "
    "thing the caller receives."
)


def resolve_output_spec(
    agent: OutputSpec | None, stage: OutputSpec | None, request: OutputSpec | None
) -> OutputSpec | None:
    """Combine the three levels field by field, later winning (agent < stage < request).

    When the request names a format other than the declared one, the declared schema and validator
    no longer describe the answer, so only the request's own schema/validator apply.
    """
    if agent is None and stage is None and request is None:
        return None
    merged = OutputSpec()
    for level in (agent, stage, request):
        if level is None:
            continue
        # Field by field, shallow: asdict would deep-copy every schema on every model turn.
        merged = replace(
            merged,
            **{f.name: v for f in fields(level) if (v := getattr(level, f.name)) is not None},
        )
    declared_format = (stage.format if stage and stage.format else None) or (
        agent.format if agent else None
    )
    if request is not None and request.format and _norm(request.format) != _norm(declared_format):
        merged = replace(merged, schema=request.schema, validator=request.validator)
    return merged


def describe_spec(spec: OutputSpec | None) -> str:
    """The part of the submit_output description (and stage prompt) that states the shape."""
    if spec is None:
        return ""
    parts: list[str] = []
    if spec.format:
        parts.append(f"Return it in this format: {spec.format}.")
    if spec.instructions:
        parts.append(spec.instructions)
    if spec.schema:
        parts.append(
            "It must be JSON valid against this schema:\n" + json.dumps(spec.schema, indent=2)
        )
    if spec.example:
        parts.append("Here is an example of the expected shape:\n" + spec.example)
    if parts:
        parts.append(PRESENTATION_CLAUSE)
    return "\n\n".join(parts)


def submit_output_description(spec: OutputSpec | None) -> str:
    """The full submit_output tool description for a stage with this spec."""
    described = describe_spec(spec)
    return SUBMIT_OUTPUT_BASE + ("\n\n" + described if described else "")


@record(frozen=False)
class FinalOutput:
    """An accepted answer."""

    content: str
    format: str | None
    stage: str
    submitted_at: str
    truncated: bool = False
    artifacts: list[str] = field(default_factory=list)
    checked: bool = True

    def to_json(self) -> dict[str, Any]:
        """The record shape used by ``lev result --json`` (format/artifacts omitted when empty)."""
        data: dict[str, Any] = {"content": self.content}
        if self.format:
            data["format"] = self.format
        data["stage"] = self.stage
        data["submitted_at"] = self.submitted_at
        data["truncated"] = self.truncated
        if self.artifacts:
            data["artifacts"] = list(self.artifacts)
        return data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if not views.has_view(views.OUTPUT_BUNDLE):
            return {"text/plain": self.content}
        return views.view(views.OUTPUT_BUNDLE, self)

    def __str__(self) -> str:
        return self.content

    def descriptor(self) -> dict[str, Any]:
        """The meta.json ``final_output`` descriptor (no content)."""
        data: dict[str, Any] = {}
        if self.format:
            data["format"] = self.format
        data.update(
            stage=self.stage,
            submitted_at=self.submitted_at,
            bytes=len(self.content.encode("utf-8")),
            truncated=self.truncated,
        )
        if self.artifacts:
            data["artifacts"] = list(self.artifacts)
        return data


def cap_content(content: str, limit: int = MAX_FINAL_OUTPUT_BYTES) -> tuple[str, bool]:
    """Cut ``content`` to at most ``limit`` UTF-8 bytes on a character boundary."""
    return cut_text_marked(content, limit)


def _norm(label: str | None) -> str:
    return (label or "").strip().lower()


TOO_DEEP = "it is nested too deeply to parse"


def _strict_json(content: str) -> Any:
    """Parse standard JSON: NaN and Infinity are Python extensions, not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    return json.loads(content, parse_constant=refuse)


def check_well_formed(fmt: str | None, content: str) -> str | None:
    """Parse ``content`` as ``fmt`` when lev_nb knows the format; return the reason it fails."""
    label = _norm(fmt)
    try:
        if label == "json":
            _strict_json(content)
        elif label == "xml":
            return _check_xml(content)
        elif label in ("yaml", "yml"):
            return _check_yaml(content)
        elif label == "csv":
            return _check_csv(content)
        elif label == "toml":
            tomllib.loads(content)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        return str(exc)
    except RecursionError:  # a hostile or runaway answer must be refused, not crash the run
        return TOO_DEEP
    return None


def _check_xml(content: str) -> str | None:
    from lxml import etree

    if "<" not in content:
        return "no XML elements found; this looks like plain text"
    try:
        etree.fromstring(content.strip().encode("utf-8"))
    except etree.XMLSyntaxError as exc:
        return str(exc)
    return None


def _check_yaml(content: str) -> str | None:
    import yaml

    # Compose only: checks the syntax of every document without building Python objects, so
    # custom tags and several documents are fine and aliases are never expanded. libyaml's parser
    # (when PyYAML has it) is several times faster; only a refused answer is parsed again by the
    # Python one, whose message points at the spot.
    fast = getattr(yaml, "CSafeLoader", None)
    for loader in ((fast,) if fast is not None else ()) + (yaml.SafeLoader,):
        try:
            for _ in yaml.compose_all(content, Loader=loader):
                pass
        except yaml.YAMLError as exc:
            if loader is yaml.SafeLoader:
                return str(exc).replace("\n", " ")
            continue
        return None
    return None


def _check_csv(content: str) -> str | None:
    # The csv module refuses fields over a global limit (128 Ki chars); an answer may hold one.
    import csv  # only a csv answer needs it

    previous = csv.field_size_limit()
    csv.field_size_limit(max(previous, len(content) + 1))
    try:
        rows = [row for row in csv.reader(io.StringIO(content)) if row]
    except csv.Error as exc:
        return str(exc)
    finally:
        csv.field_size_limit(previous)
    if not rows:
        return "no rows found"
    width = len(rows[0])
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            return f"row {number} has {len(row)} fields, but the header row has {width}"
    return None


def check_schema(schema: dict[str, Any], content: str) -> tuple[str | None, str | None]:
    """Validate JSON ``content`` against ``schema``.

    Returns ``(refusal, warning)``: a refusal text for the agent, or a warning when the schema
    itself is unusable (in which case the check is skipped).
    """
    validator, problem = compile_schema(schema)
    if validator is None:
        return None, f"the declared output schema is not a valid JSON Schema, so it was not checked: {problem}"
    try:
        document = _strict_json(content)
    except ValueError as exc:
        return f"it is not valid JSON ({exc})", None
    except RecursionError:
        return f"it is not valid JSON ({TOO_DEEP})", None
    try:
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    except RecursionError:
        return f"it could not be checked ({TOO_DEEP})", None
    if not errors:
        return None, None
    shown = [f"{_json_path(e.absolute_path)}: {e.message}" for e in errors[:MAX_SCHEMA_VIOLATIONS]]
    more = len(errors) - len(shown)
    text = "; ".join(shown) + (f"; (and {more} more)" if more > 0 else "")
    return text, None


def _json_path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def artifacts_outside(workdir: Path, artifacts: list[str]) -> list[str]:
    """The artifact paths that would resolve outside ``workdir`` (symlinks followed)."""
    bad = []
    for item in artifacts:
        try:
            confine(workdir, item)
        except (PathEscape, OSError):
            bad.append(item)
    return bad
