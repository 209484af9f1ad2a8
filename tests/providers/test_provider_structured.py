"""Structured output on OpenAI-compatible servers and on Anthropic: a stage that owes an answer with a JSON Schema
offers ``submit_output`` as a strict tool whose ``content`` is the schema, so the server holds the
answer to it; a server that refuses the schema is asked again without it, and the person is told.

The runs go through the real ``openai`` and ``anthropic`` SDKs to the Chat Completions and Messages
stand-ins on 127.0.0.1; the tests read the tools the server received and the run's final output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_standin import ChatStandIn, Recorded, Reply, chat_error, completion, serve_chat, tool_call
from standin import API_KEY, StandIn, error_body, message, serve, text, tool_use

import lev_nb
from lev_nb.messages import ToolCall, ToolSpec
from lev_nb.providers.structured import constrained_submit_tool, is_schema_refusal, strict_schema, unpack_submission

SCHEMA = {
    "type": "object",
    "required": ["summary", "files_changed"],
    "properties": {"summary": {"type": "string"}, "files_changed": {"type": "array", "items": {"type": "string"}}},
}
AGENT = """
[agent]
name = "shaped"
[stages.report]
mode = "output"
model = { provider = "openai", model = "gpt-4o-mini" }
nudge = { enabled = false }
[stages.report.output]
format = "json"
[stages.report.output.schema]
type = "object"
required = ["summary", "files_changed"]
[stages.report.output.schema.properties]
summary = { type = "string" }
files_changed = { type = "array", items = { type = "string" } }
"""
ANSWER = {"summary": "nothing changed", "files_changed": []}


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatStandIn]:
    for server in serve_chat():
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        yield server


def submit_tool(recorded: Recorded) -> dict[str, Any]:
    return next(t["function"] for t in recorded.body.get("tools", []) if t["function"]["name"] == "submit_output")


# ------------------------------------------------------------------------------------ the schema
def test_a_schema_strict_mode_can_hold_gets_additional_properties_closed() -> None:
    held = strict_schema(SCHEMA)
    assert held is not None and held["additionalProperties"] is False
    assert "additionalProperties" not in SCHEMA  # the stage's own schema is not touched
    nested = {"type": "array", "items": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}}
    assert strict_schema(nested)["items"]["additionalProperties"] is False  # type: ignore[index]


def test_definitions_move_to_the_root_of_the_tool_so_refs_still_resolve() -> None:
    item = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}
    schema = {"type": "object", "required": ["items"], "$defs": {"item": item},
              "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}}}
    tool = constrained_submit_tool(ToolSpec("submit_output", "d"), schema)
    assert tool is not None
    assert tool.parameters["$defs"]["item"]["additionalProperties"] is False
    assert "$defs" not in tool.parameters["properties"]["content"]
    # A ref to the schema's own root would point at the tool's once moved: not strict.
    assert strict_schema({"anyOf": [{"type": "string"}, {"$ref": "#"}]}) is None


def test_numeric_bounds_are_strict_for_openai_but_not_for_anthropic() -> None:
    bounded = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer", "minimum": 1}}}
    assert strict_schema(bounded, "openai") is not None
    assert strict_schema(bounded, "anthropic") is None


@pytest.mark.parametrize("schema", [
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": True},
    {"type": "object"},
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "minLength": 2}}},
    "not a schema",
])
def test_a_schema_strict_mode_cannot_hold_is_left_to_the_engine(schema: Any) -> None:
    assert strict_schema(schema) is None
    assert constrained_submit_tool(ToolSpec("submit_output", "d"), schema) is None


def test_a_structured_submission_reaches_the_engine_as_json_text() -> None:
    call = unpack_submission(ToolCall("c1", "submit_output", {"content": {"summary": "é"}, "artifacts": []}))
    assert call.arguments == {"content": '{"summary": "é"}', "artifacts": []}
    plain = ToolCall("c2", "submit_output", {"content": "text"})
    assert unpack_submission(plain) is plain
    assert is_schema_refusal(400, "Invalid schema for function 'submit_output': ...")
    assert not is_schema_refusal(400, "This model's maximum context length is 128000 tokens")
    assert not is_schema_refusal(500, "schema")


# ------------------------------------------------------------------------------------ whole runs
def test_the_server_is_asked_to_hold_the_answer_to_the_schema(chat: ChatStandIn, home: Path, workdir: Path) -> None:
    # A strict server answers with the arguments its grammar allows: content as a JSON value.
    chat.queue(Reply(body=completion("", tool_call("call_1", "submit_output", {"content": ANSWER, "artifacts": []}))))
    chat.responder = lambda r: Reply(body=completion("done"))
    run = lev_nb.load(AGENT).run("report", home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error
    tool = submit_tool(chat.requests[0])
    assert tool["strict"] is True
    parameters = tool["parameters"]
    assert parameters["required"] == ["content", "artifacts"] and parameters["additionalProperties"] is False
    assert parameters["properties"]["content"] == {**SCHEMA, "additionalProperties": False}
    assert json.loads(run.result.content) == ANSWER
    assert run.warnings == []


def test_a_server_that_refuses_the_schema_is_asked_without_it_and_the_person_told(
        chat: ChatStandIn, lev: Any, tmp_path: Path, workdir: Path) -> None:
    answers = [completion("", tool_call("call_1", "submit_output", {"content": json.dumps(ANSWER)})),
               completion("done")]

    def answer(recorded: Recorded) -> Reply:
        if any(t["function"].get("strict") for t in recorded.body.get("tools", [])):
            return Reply(400, chat_error("Invalid schema for function 'submit_output': 'strict' is not supported",
                                         "invalid_function_parameters"))
        return Reply(body=answers.pop(0) if answers else completion("done"))

    chat.responder = answer
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.leviath").write_text(AGENT)
    result = lev("run", str(folder), "--task", "report", "--workdir", str(workdir), "--json")
    assert result.returncode == 0, result.stderr
    meta = json.loads(result.stdout)
    assert meta["status"] == "complete", meta.get("error")
    strict = [bool(submit_tool(r).get("strict")) for r in chat.requests]
    assert strict[:2] == [True, False] and not any(strict[2:])  # asked once with it, never again
    assert submit_tool(chat.requests[1])["parameters"]["properties"]["content"]["type"] == "string"
    warnings = [w for w in meta["warnings"] if w["code"] == "output-unconstrained"]
    assert len(warnings) == 1 and warnings[0]["stage"] == "report"
    assert "would not hold the final answer of stage 'report' to its schema" in warnings[0]["message"]
    assert "would not hold the final answer" in result.stderr  # told on the terminal, not only on record
    shown = lev("result", meta["run_id"], "--raw")
    assert json.loads(shown.stdout) == ANSWER


def test_a_schema_strict_mode_cannot_hold_is_sent_as_before(chat: ChatStandIn, home: Path, workdir: Path) -> None:
    loose = AGENT.replace('required = ["summary", "files_changed"]', 'required = ["summary"]')
    chat.queue(Reply(body=completion("", tool_call("call_1", "submit_output", {"content": json.dumps(ANSWER)}))))
    chat.responder = lambda r: Reply(body=completion("done"))
    run = lev_nb.load(loose).run("report", home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error
    tool = submit_tool(chat.requests[0])
    assert "strict" not in tool and tool["parameters"]["properties"]["content"]["type"] == "string"
    assert '"files_changed"' in tool["description"]  # the schema still reaches the model in words
    assert json.loads(run.result.content) == ANSWER


def test_a_stage_without_a_schema_offers_the_tool_unchanged(chat: ChatStandIn, home: Path, workdir: Path) -> None:
    plain = AGENT.split("[stages.report.output.schema]")[0]
    chat.queue(Reply(body=completion("", tool_call("call_1", "submit_output", {"content": "{}"}))))
    chat.responder = lambda r: Reply(body=completion("done"))
    run = lev_nb.load(plain).run("report", home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error
    assert "strict" not in submit_tool(chat.requests[0])


# ------------------------------------------------------------------------------------ Anthropic
@pytest.fixture
def messages_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    for server in serve():
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def anthropic_submit(recorded: Recorded) -> dict[str, Any]:
    return next(t for t in recorded.body.get("tools", []) if t["name"] == "submit_output")


def test_claude_gets_submit_output_as_a_strict_tool(messages_api: StandIn, home: Path, workdir: Path) -> None:
    toml = AGENT.replace('provider = "openai", model = "gpt-4o-mini"', 'provider = "anthropic", model = "claude-sonnet-4-5"')
    messages_api.queue(Reply(body=message(tool_use("toolu_1", "submit_output", {"content": ANSWER, "artifacts": []}),
                                          stop="tool_use")))
    messages_api.responder = lambda r: Reply(body=message(text("done")))
    run = lev_nb.load(toml).run("report", home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error
    tool = anthropic_submit(messages_api.requests[0])
    assert tool["strict"] is True
    assert tool["input_schema"]["properties"]["content"] == {**SCHEMA, "additionalProperties": False}
    assert json.loads(run.result.content) == ANSWER


def test_a_claude_model_without_strict_tools_is_asked_without_and_the_person_told(
        messages_api: StandIn, home: Path, workdir: Path) -> None:
    toml = AGENT.replace('provider = "openai", model = "gpt-4o-mini"', 'provider = "anthropic", model = "claude-3-haiku"')
    answers = [message(tool_use("toolu_1", "submit_output", {"content": json.dumps(ANSWER)}), stop="tool_use"),
               message(text("done"))]

    def answer(recorded: Recorded) -> Reply:
        if any(t.get("strict") for t in recorded.body.get("tools", [])):
            return Reply(400, error_body("invalid_request_error",
                                         "'claude-3-haiku' does not support strict tools (structured outputs)"))
        return Reply(body=answers.pop(0) if answers else message(text("done")))

    messages_api.responder = answer
    run = lev_nb.load(toml).run("report", home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error
    assert [bool(anthropic_submit(r).get("strict")) for r in messages_api.requests][:2] == [True, False]
    assert [w.code for w in run.warnings] == ["output-unconstrained"]
    assert json.loads(run.result.content) == ANSWER
