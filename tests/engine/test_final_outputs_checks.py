"""The submission checks of a final output, one at a time and in their order (spec/runtime.md §8.3).

These call :func:`evaluate_submission` directly; tests/engine/test_final_outputs.py proves the same rules
through whole runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lev_nb.engine.pipeline.outputs import (
    MAX_FINAL_OUTPUT_BYTES,
    artifacts_outside,
    cap_content,
    check_schema,
    check_well_formed,
)
from lev_nb.engine.pipeline.submission import RECORDED, evaluate_submission
from lev_nb.engine.plan.types import OutputSpec
from lev_nb.scripting import Invalid, Unusable, Valid, compile_validator

STAGES = ["research", "Summary"]


def submit(
    workdir: Path,
    content: Any = "an answer",
    *,
    spec: OutputSpec | None = None,
    artifacts: Any = None,
    validator: Any = None,
    omit_content: bool = False,
):
    """Evaluate one submit_output call made in stage 'Summary'."""
    arguments: dict[str, Any] = {} if omit_content else {"content": content}
    if artifacts is not None:
        arguments["artifacts"] = artifacts
    return evaluate_submission(
        arguments, spec=spec, stage="Summary", stage_names=STAGES, workdir=workdir, validator=validator
    )


# ------------------------------------------------------------------------- 1. empty content
def test_missing_content_is_refused(tmp_path):
    outcome = submit(tmp_path, omit_content=True)
    assert outcome.output is None
    assert outcome.text.startswith("[error] missing 'content' argument")


@pytest.mark.parametrize("blank", ["", "   ", "\n\t \n"])
def test_blank_content_is_refused(tmp_path, blank):
    outcome = submit(tmp_path, blank)
    assert not outcome.accepted
    assert outcome.text == (
        "[error] the final output is empty - submit the answer itself, not a placeholder"
    )


def test_non_string_content_is_refused_as_missing(tmp_path):
    outcome = submit(tmp_path, 42)
    assert not outcome.accepted
    assert "missing 'content'" in outcome.text


# ------------------------------------------------------------------------- 2. a stage name
@pytest.mark.parametrize("name", ["research", "  RESEARCH \n", "summary", "Summary"])
def test_a_bare_stage_name_is_refused(tmp_path, name):
    outcome = submit(tmp_path, name)
    assert not outcome.accepted
    assert outcome.text.startswith("[error] '")
    assert "is the name of a stage in this agent, not an answer" in outcome.text


def test_text_that_merely_mentions_a_stage_is_accepted(tmp_path):
    outcome = submit(tmp_path, "research found nothing")
    assert outcome.accepted
    assert outcome.text == RECORDED


def test_empty_check_comes_before_the_stage_name_check(tmp_path):
    assert "is empty" in submit(tmp_path, " ").text


# ------------------------------------------------------------------------- 3. well-formedness
WELL_FORMED = [
    ("json", '{"a": [1, 2, {"b": null}]}'),
    ("json", "42"),
    ("xml", "<report><finding severity='high'>x</finding></report>"),
    ("xml", "<?xml version='1.0'?>\n<a/>\n"),
    ("yaml", "a: 1\nb:\n  - x\n  - y\n"),
    ("yml", "- one\n- two\n"),
    ("csv", "name,count\nalpha,1\nbeta,2\n"),
    ("csv", 'name,note\nalpha,"has, a comma"\n'),
    ("toml", 'title = "x"\n[owner]\nname = "y"\n'),
]

MALFORMED = [
    ("json", '```json\n{"a": 1}\n```'),
    ("json", 'Here is the answer: {"a": 1}'),
    ("json", "{'a': 1}"),
    ("xml", "<report><finding></report>"),
    ("xml", "just a sentence, no markup"),
    ("xml", "<a></a><b></b>"),
    ("yaml", "a: [1, 2\nb: 3"),
    ("yml", "key: value\n  - broken: [\n"),
    ("csv", "a,b,c\n1,2\n"),
    ("csv", "a,b\n1,2,3\n"),
    ("toml", "title = \n"),
    ("toml", "a = 1\na = 2\n"),
]


@pytest.mark.parametrize("fmt,content", WELL_FORMED)
def test_well_formed_content_passes(tmp_path, fmt, content):
    assert check_well_formed(fmt, content) is None
    outcome = submit(tmp_path, content, spec=OutputSpec(format=fmt))
    assert outcome.accepted, outcome.text
    assert outcome.output.format == fmt


@pytest.mark.parametrize("fmt,content", MALFORMED)
def test_malformed_content_is_refused_naming_the_format(tmp_path, fmt, content):
    outcome = submit(tmp_path, content, spec=OutputSpec(format=fmt))
    assert not outcome.accepted
    assert outcome.text.startswith(f"[error] the final output is not valid {fmt}: ")
    assert len(outcome.text) > len(f"[error] the final output is not valid {fmt}: ")


def test_empty_csv_has_no_rows():
    assert check_well_formed("csv", "\n\n") == "no rows found"


def test_ragged_csv_names_the_row():
    reason = check_well_formed("csv", "a,b,c\n1,2,3\n4,5\n")
    assert reason is not None and "row 3" in reason


def test_plain_text_labelled_xml_is_called_plain_text():
    assert check_well_formed("xml", "no markup here") == "no XML elements found; this looks like plain text"


@pytest.mark.parametrize("label", [" JSON ", "Json", "json\n"])
def test_format_label_is_matched_trimmed_and_case_insensitive(tmp_path, label):
    outcome = submit(tmp_path, "not json", spec=OutputSpec(format=label))
    assert outcome.text.lower().startswith("[error] the final output is not valid json: ")
    assert f"valid {label.strip()}:" in outcome.text  # the label as the caller wrote it


@pytest.mark.parametrize("label", ["markdown", "a2ui", "text/vnd.acme+xml", "application/json", "xml-ish", None])
def test_labels_without_a_built_in_check_are_carried_unchecked(tmp_path, label):
    outcome = submit(tmp_path, "```\n{not: parseable <as anything\n```", spec=OutputSpec(format=label))
    assert outcome.accepted, outcome.text
    assert outcome.output.format == label


# ------------------------------------------------------------------------- 4. JSON Schema
SCHEMA = {
    "type": "object",
    "required": ["summary", "files_changed"],
    "properties": {
        "summary": {"type": "string"},
        "files_changed": {"type": "array", "items": {"type": "string"}},
    },
}


def test_content_matching_the_schema_is_accepted(tmp_path):
    content = '{"summary": "ok", "files_changed": ["a.py"]}'
    outcome = submit(tmp_path, content, spec=OutputSpec(format="json", schema=SCHEMA))
    assert outcome.accepted, outcome.text


def test_schema_violations_are_listed_with_their_paths(tmp_path):
    content = '{"summary": 3, "files_changed": ["a.py", 7]}'
    outcome = submit(tmp_path, content, spec=OutputSpec(format="json", schema=SCHEMA))
    assert not outcome.accepted
    assert outcome.text.startswith("[error] the final output does not match the declared schema: ")
    assert "$.summary: 3 is not of type 'string'" in outcome.text
    assert "$.files_changed[1]: 7 is not of type 'string'" in outcome.text


def test_a_missing_property_is_reported_at_the_root(tmp_path):
    outcome = submit(tmp_path, '{"summary": "x"}', spec=OutputSpec(format="json", schema=SCHEMA))
    assert "$: 'files_changed' is a required property" in outcome.text


def test_at_most_three_violations_are_shown(tmp_path):
    schema = {"type": "array", "items": {"type": "string"}}
    refusal, warning = check_schema(schema, "[1, 2, 3, 4, 5, 6]")
    assert warning is None
    assert refusal is not None
    shown = [part for part in refusal.split("; ") if part.startswith("$")]
    assert shown == [
        "$[0]: 1 is not of type 'string'",
        "$[1]: 2 is not of type 'string'",
        "$[2]: 3 is not of type 'string'",
    ]
    assert refusal.endswith("(and 3 more)")


def test_schema_without_a_json_format_still_requires_json(tmp_path):
    outcome = submit(tmp_path, "plain words", spec=OutputSpec(schema=SCHEMA))
    assert outcome.text.startswith(
        "[error] the final output does not match the declared schema: it is not valid JSON ("
    )


def test_an_unusable_schema_is_skipped_with_a_warning(tmp_path):
    outcome = submit(tmp_path, '{"a": 1}', spec=OutputSpec(format="json", schema={"type": 12}))
    assert outcome.accepted, outcome.text
    assert len(outcome.warnings) == 1
    assert "not a valid JSON Schema" in outcome.warnings[0]


def test_well_formedness_is_reported_before_the_schema(tmp_path):
    outcome = submit(tmp_path, '```json\n{"summary": 1}\n```', spec=OutputSpec(format="json", schema=SCHEMA))
    assert outcome.text.startswith("[error] the final output is not valid json: ")


# ------------------------------------------------------------------------- 5. the Rhai validator
def validator(body: str):
    """Compile ``fn validate(content) { body }``."""
    return compile_validator(source="fn validate(content) {\n" + body + "\n}", label="test-validator")


@pytest.mark.parametrize("body", ["()", '""', '"   "', "if content.len() > 0 { return; }"])
def test_a_validator_returning_unit_or_blank_accepts(tmp_path, body):
    check = validator(body)
    assert isinstance(check.check("x"), Valid)
    outcome = submit(tmp_path, "x", validator=check)
    assert outcome.accepted and outcome.output.checked
    assert outcome.warnings == []


def test_a_validator_string_is_a_rejection_sent_back(tmp_path):
    check = validator('if !content.contains("verdict:") { return "start with verdict:"; } ()')
    assert check.check("verdict: fine") == Valid()
    assert check.check("nope") == Invalid("start with verdict:")
    outcome = submit(tmp_path, "nope", validator=check)
    assert not outcome.accepted
    assert outcome.text == "[error] the final output was rejected: start with verdict:"
    assert submit(tmp_path, "verdict: fine", validator=check).accepted


@pytest.mark.parametrize(
    "body",
    [
        'throw "boom"',
        "42",
        "[1, 2]",
        "let x = 1 / 0; x",
        "undefined_function(content)",
        "loop { }",
        "let n = 0; while true { n += 1; } ()",
    ],
)
def test_a_broken_validator_records_the_answer_unchecked_with_a_warning(tmp_path, body):
    check = validator(body)
    assert isinstance(check.check("answer"), Unusable)
    outcome = submit(tmp_path, "answer", validator=check)
    assert outcome.accepted
    assert outcome.output.checked is False
    assert outcome.output.content == "answer"
    assert outcome.text == RECORDED
    assert len(outcome.warnings) == 1
    assert "accepted unchecked" in outcome.warnings[0]


def test_the_schema_is_checked_before_the_validator(tmp_path):
    check = validator('"validator says no"')
    outcome = submit(tmp_path, '{"summary": 1}', spec=OutputSpec(format="json", schema=SCHEMA), validator=check)
    assert "does not match the declared schema" in outcome.text


def test_the_validator_runs_before_the_artifact_check(tmp_path):
    outcome = submit(tmp_path, "x", validator=validator('"validator says no"'), artifacts=["../escape"])
    assert outcome.text == "[error] the final output was rejected: validator says no"


# ------------------------------------------------------------------------- 6. artifacts
def test_artifacts_inside_the_workdir_are_recorded_even_before_they_exist(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text("a\n")
    outcome = submit(tmp_path, "done", artifacts=["data/rows.csv", "later/report.md", "./x/../y.txt"])
    assert outcome.accepted, outcome.text
    assert outcome.output.artifacts == ["data/rows.csv", "later/report.md", "./x/../y.txt"]


def test_blank_and_non_string_artifacts_are_dropped(tmp_path):
    outcome = submit(tmp_path, "done", artifacts=["", "  ", 3, "keep.txt"])
    assert outcome.accepted
    assert outcome.output.artifacts == ["keep.txt"]


def test_any_escaping_artifact_refuses_the_whole_submission(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    absolute = str(tmp_path / "elsewhere.txt")
    outcome = submit(work, "done", artifacts=["ok.txt", "../secret", absolute, "a/../../b"])
    assert not outcome.accepted
    assert outcome.text == (
        "[error] these artifact paths do not resolve inside the working directory: "
        f"../secret, {absolute}, a/../../b"
    )


def test_a_symlink_out_of_the_workdir_is_an_escape(tmp_path):
    work = tmp_path / "w"
    outside = tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    os.symlink(outside, work / "link")
    assert artifacts_outside(work, ["link/file.txt", "plain.txt"]) == ["link/file.txt"]


def test_the_workdir_itself_is_inside(tmp_path):
    assert artifacts_outside(tmp_path, [".", "./"]) == []


# ------------------------------------------------------------------------- the size cap
def test_content_at_the_cap_is_kept_whole():
    text = "a" * MAX_FINAL_OUTPUT_BYTES
    assert cap_content(text) == (text, False)


@pytest.mark.parametrize("char", ["é", "€", "😀"])
@pytest.mark.parametrize("lead", [0, 1, 2, 3])
def test_the_cap_cuts_on_a_character_boundary(char, lead):
    text = "x" * lead + char * (MAX_FINAL_OUTPUT_BYTES // len(char.encode()) + 10)
    kept, truncated = cap_content(text)
    assert truncated
    raw = kept.encode("utf-8")
    assert len(raw) <= MAX_FINAL_OUTPUT_BYTES
    assert len(raw) > MAX_FINAL_OUTPUT_BYTES - len(char.encode())
    assert text.startswith(kept)


def test_an_over_cap_submission_is_recorded_truncated_and_the_agent_is_told(tmp_path):
    outcome = submit(tmp_path, "é" * MAX_FINAL_OUTPUT_BYTES)
    assert outcome.accepted
    assert outcome.output.truncated is True
    assert len(outcome.output.content.encode()) == MAX_FINAL_OUTPUT_BYTES
    assert outcome.text.startswith(RECORDED)
    assert "256 KiB" in outcome.text and "shorter" in outcome.text


def test_the_record_carries_format_stage_and_time(tmp_path):
    outcome = submit(tmp_path, "# hi", spec=OutputSpec(format="markdown"))
    out = outcome.output
    assert (out.content, out.format, out.stage, out.truncated, out.artifacts) == (
        "# hi", "markdown", "Summary", False, []
    )
    assert out.submitted_at.endswith("Z") and "T" in out.submitted_at
    assert out.to_json() == {
        "content": "# hi",
        "format": "markdown",
        "stage": "Summary",
        "submitted_at": out.submitted_at,
        "truncated": False,
    }


# ------------------------------------------------------------------------- hostile answers
# Regressions: each of these used to raise out of the check and end the run as an internal error.
@pytest.mark.parametrize(
    "fmt,content",
    [
        ("json", "[" * 50_000),
        ("toml", "a = " + "[" * 50_000),
        pytest.param("yaml", "[" * 50_000, marks=pytest.mark.slow),  # the YAML parser takes ~1 s to give up
    ],
)
def test_absurdly_deep_nesting_is_refused_not_a_crash(tmp_path, fmt, content):
    outcome = submit(tmp_path, content, spec=OutputSpec(format=fmt))
    assert outcome.text == f"[error] the final output is not valid {fmt}: it is nested too deeply to parse"


def test_absurdly_deep_json_against_a_schema_is_refused(tmp_path):
    outcome = submit(tmp_path, "[" * 50_000, spec=OutputSpec(schema={"type": "array"}))
    assert outcome.text.startswith("[error] the final output does not match the declared schema: it is not valid")


def test_a_csv_field_larger_than_the_csv_module_limit_is_well_formed(tmp_path):
    import csv

    before = csv.field_size_limit()
    content = "name,blob\nx," + "y" * 200_000 + "\n"
    outcome = submit(tmp_path, content, spec=OutputSpec(format="csv"))
    assert outcome.accepted, outcome.text
    assert csv.field_size_limit() == before  # the global limit is put back


@pytest.mark.parametrize("content", ["NaN", '{"a": Infinity}', "[-Infinity]"])
def test_json_extensions_are_not_json(tmp_path, content):
    outcome = submit(tmp_path, content, spec=OutputSpec(format="json"))
    assert outcome.text.startswith("[error] the final output is not valid json: ")
    assert "is not a JSON value" in outcome.text


@pytest.mark.parametrize(
    "content",
    ["---\na: 1\n---\nb: 2\n", "a: !custom tagged\nbase: &b {x: 1}\nuse: *b\n", "!!python/object:os.system x\n"],
)
def test_well_formed_yaml_is_accepted_whatever_its_tags_or_documents(tmp_path, content):
    outcome = submit(tmp_path, content, spec=OutputSpec(format="yaml"))
    assert outcome.accepted, outcome.text


def test_an_artifact_with_a_nul_byte_refuses_the_submission(tmp_path):
    outcome = submit(tmp_path, "done", artifacts=["ok.txt", "bad\0name"])
    assert not outcome.accepted
    assert outcome.text.startswith("[error] these artifact paths do not resolve inside the working directory: ")


def test_a_lone_surrogate_is_refused_not_a_crash(tmp_path):
    outcome = submit(tmp_path, "broken \ud800 text", validator=validator("()"))
    assert not outcome.accepted
    assert outcome.text.startswith("[error] the final output contains an invalid character")
