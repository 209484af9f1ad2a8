"""Resolving the output spec across [agent.output], [stages.X.output] and the launch request, and
how the resolved spec is described to the model (spec/runtime.md §8.1-8.2)."""

from __future__ import annotations

import json

import pytest
from support import OUTPUT_STAGE, call, say

from lev_nb.engine.pipeline.outputs import (
    PRESENTATION_CLAUSE,
    SUBMIT_OUTPUT_BASE,
    describe_spec,
    resolve_output_spec,
    submit_output_description,
)
from lev_nb.engine.plan.types import OutputSpec

SCHEMA = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
OTHER_SCHEMA = {"type": "array"}


# ------------------------------------------------------------------------- field by field
def test_nothing_declared_anywhere_resolves_to_none():
    assert resolve_output_spec(None, None, None) is None


def test_each_field_comes_from_the_latest_level_that_sets_it():
    agent = OutputSpec(format="json", instructions="agent says", example="{}", schema=SCHEMA, validator="v.rhai")
    stage = OutputSpec(instructions="stage says")
    request = OutputSpec(example='{"n": 1}')
    spec = resolve_output_spec(agent, stage, request)
    assert spec == OutputSpec(
        format="json", instructions="stage says", example='{"n": 1}', schema=SCHEMA, validator="v.rhai"
    )


def test_stage_overrides_agent_and_request_overrides_both():
    agent = OutputSpec(format="json", instructions="a")
    stage = OutputSpec(format="json", instructions="s")
    request = OutputSpec(instructions="r")
    assert resolve_output_spec(agent, stage, None).instructions == "s"
    assert resolve_output_spec(agent, None, request).instructions == "r"
    assert resolve_output_spec(agent, stage, request).instructions == "r"
    assert resolve_output_spec(None, None, request) == OutputSpec(instructions="r")


def test_a_request_without_a_format_keeps_the_declared_schema_and_validator():
    stage = OutputSpec(format="json", schema=SCHEMA, validator="check.rhai")
    spec = resolve_output_spec(None, stage, OutputSpec(instructions="be brief"))
    assert (spec.format, spec.schema, spec.validator) == ("json", SCHEMA, "check.rhai")


def test_naming_a_different_format_drops_the_declared_schema_and_validator():
    agent = OutputSpec(format="json", schema=SCHEMA, validator="check.rhai", instructions="keep me")
    spec = resolve_output_spec(agent, None, OutputSpec(format="xml"))
    assert spec.format == "xml"
    assert spec.schema is None and spec.validator is None
    assert spec.instructions == "keep me"  # only the shape checks are dropped


def test_the_declared_format_is_the_stage_one_when_both_levels_set_it():
    agent = OutputSpec(format="xml")
    stage = OutputSpec(format="json", schema=SCHEMA)
    # Same as the stage's format: the stage's schema still applies.
    assert resolve_output_spec(agent, stage, OutputSpec(format="json")).schema == SCHEMA
    # Same as the agent's but not the stage's: that is a different format, so it is dropped.
    assert resolve_output_spec(agent, stage, OutputSpec(format="xml")).schema is None


def test_the_same_format_spelled_differently_keeps_the_schema():
    spec = resolve_output_spec(OutputSpec(format="json", schema=SCHEMA), None, OutputSpec(format=" JSON "))
    assert spec.schema == SCHEMA
    assert spec.format == " JSON "


def test_a_different_format_with_its_own_schema_uses_the_request_schema():
    spec = resolve_output_spec(
        OutputSpec(format="yaml", schema=SCHEMA, validator="check.rhai"),
        None,
        OutputSpec(format="json", schema=OTHER_SCHEMA),
    )
    assert spec.schema == OTHER_SCHEMA
    assert spec.validator is None


def test_a_format_where_none_was_declared_drops_a_formatless_schema():
    # The declared spec named no format, so any request format differs from it.
    spec = resolve_output_spec(OutputSpec(schema=SCHEMA), None, OutputSpec(format="json"))
    assert spec.schema is None


# ------------------------------------------------------------------------- the description
def test_an_empty_spec_adds_nothing_to_the_base_description():
    assert describe_spec(None) == ""
    assert describe_spec(OutputSpec()) == ""
    assert submit_output_description(None) == SUBMIT_OUTPUT_BASE
    assert PRESENTATION_CLAUSE not in submit_output_description(OutputSpec())


def test_the_description_states_every_field_then_the_presentation_clause():
    spec = OutputSpec(format="a2ui", instructions="One card per finding.", example='{"root": {}}', schema=SCHEMA)
    text = describe_spec(spec)
    assert text.split("\n\n") == [
        "Return it in this format: a2ui.",
        "One card per finding.",
        "It must be JSON valid against this schema:\n" + json.dumps(SCHEMA, indent=2),
        'Here is an example of the expected shape:\n{"root": {}}',
        PRESENTATION_CLAUSE,
    ]
    assert submit_output_description(spec) == SUBMIT_OUTPUT_BASE + "\n\n" + text


@pytest.mark.parametrize(
    "spec,first",
    [
        (OutputSpec(format="xml"), "Return it in this format: xml."),
        (OutputSpec(instructions="reply with only the integer"), "reply with only the integer"),
        (OutputSpec(example="<a/>"), "Here is an example of the expected shape:\n<a/>"),
    ],
)
def test_any_one_field_brings_the_presentation_clause(spec, first):
    assert describe_spec(spec) == first + "\n\n" + PRESENTATION_CLAUSE


def test_the_clause_is_scoped_to_presentation():
    assert "length" in PRESENTATION_CLAUSE and "structure" in PRESENTATION_CLAUSE
    assert "what to lead with" in PRESENTATION_CLAUSE


# ------------------------------------------------------------------------- through a run
DECLARED = """
[agent.output]
format = "json"
instructions = "agent instructions"

[stages.answer]
mode = "output"
available_tools = ["submit_output"]
system_prompt = "Lead with the diagnosis and name the report file."
nudge = { enabled = false }
[stages.answer.output]
example = '{"n": 1}'
[stages.answer.output.schema]
type = "object"
required = ["n"]
[stages.answer.output.schema.properties]
n = { type = "integer" }
[stages.answer.transitions]
"""


def submit_tool(request):
    return next(t for t in request.tools if t.name == "submit_output")


def test_the_model_sees_the_resolved_spec_in_the_tool_and_the_stage_prompt(engine):
    run, model = engine.run(DECLARED, [call("submit_output", content='{"n": 1}'), say("done")])
    assert run.status == "complete", run.error
    tool = submit_tool(model.requests[0])
    assert tool.parameters["required"] == ["content"]
    assert set(tool.parameters["properties"]) == {"content", "artifacts"}
    assert tool.parameters["properties"]["artifacts"]["items"] == {"type": "string"}
    for part in ("Return it in this format: json.", "agent instructions", '"required": [\n    "n"\n  ]',
                 'Here is an example of the expected shape:\n{"n": 1}', PRESENTATION_CLAUSE):
        assert part in tool.description
    system = "\n".join(model.requests[0].system)
    # require_output also states the spec in the stage prompt, after the stage's own text.
    assert system.index("Lead with the diagnosis") < system.index(PRESENTATION_CLAUSE)
    assert "agent instructions" in system


def test_a_launch_request_overrides_per_field_and_is_recorded(engine):
    run, model = engine.run(
        DECLARED,
        [call("submit_output", content='{"n": 2}'), say("done")],
        output_instructions="reply with only the object",
    )
    assert run.status == "complete", run.error
    description = submit_tool(model.requests[0]).description
    assert "reply with only the object" in description
    assert "agent instructions" not in description
    assert "Return it in this format: json." in description
    assert run.meta["output_request"] == {"instructions": "reply with only the object"}


def test_a_launch_format_drops_the_declared_schema_end_to_end(engine):
    xml = "<result><n>not a number</n></result>"
    run, model = engine.run(DECLARED, [call("submit_output", content=xml), say("done")], output_format="xml")
    assert run.status == "complete", run.error
    assert run.result.content == xml
    assert run.result.format == "xml"
    description = submit_tool(model.requests[0]).description
    assert "Return it in this format: xml." in description
    assert "against this schema" not in description
    assert run.meta["output_request"] == {"format": "xml"}


def test_the_launch_format_is_checked_for_well_formedness(engine):
    turns = [call("submit_output", content='{"n": 1}'), call("submit_output", content="<n>1</n>"), say("done")]
    run, _model = engine.run(DECLARED, turns, output_format="xml")
    assert run.status == "complete", run.error
    rejected = [e for e in run.events.snapshot() if e.kind == "output_rejected"]
    assert len(rejected) == 1 and "not valid xml" in rejected[0].reason
    assert run.result.content == "<n>1</n>"


def test_a_launch_schema_is_enforced(engine):
    schema = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
    turns = [call("submit_output", content='{"ok": "yes"}'), call("submit_output", content='{"ok": true}'), say("done")]
    run, model = engine.run(OUTPUT_STAGE, turns, output_format="json", output_schema=schema)
    assert run.status == "complete", run.error
    assert run.result.content == '{"ok": true}'
    assert run.meta["output_request"] == {"format": "json", "schema": schema}
    # The refusal reached the model as the tool result of its first call.
    second = "\n".join(str(m.content) for m in model.requests[1].messages)
    assert "does not match the declared schema" in second and "$.ok" in second


def test_the_same_format_at_launch_keeps_the_declared_schema(engine):
    turns = [call("submit_output", content='{"n": "x"}'), call("submit_output", content='{"n": 3}'), say("done")]
    run, _ = engine.run(DECLARED, turns, output_format="JSON")
    assert run.status == "complete", run.error
    assert run.result.content == '{"n": 3}'
    assert run.result.format == "JSON"
