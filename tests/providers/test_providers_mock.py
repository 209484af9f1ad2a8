"""MockModel: what it chooses for each kind of request, decided from the request alone."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import tomllib
import xml.etree.ElementTree as ET

import pytest
import yaml

from lev_nb.messages import Message, ModelRequest, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from lev_nb.providers import MockModel


def spec(name: str, description: str = "") -> ToolSpec:
    return ToolSpec(name=name, description=description, parameters={"type": "object", "properties": {}})


def run(request: ModelRequest):
    return asyncio.run(MockModel().complete(request))


def stage_request(tools: list[str], messages: list[Message] | None = None, **kw) -> ModelRequest:
    return ModelRequest(
        provider="mock",
        model="m",
        stage="work",
        tools=[spec(t) for t in tools],
        messages=messages if messages is not None else [Message("user", "do the task")],
        **kw,
    )


def test_routing_picks_the_first_choice_even_when_done_is_allowed():
    request = ModelRequest("mock", "m", purpose="routing", stage="plan", choices=["build", "review"], allow_done=True)
    response = run(request)
    assert response.text == "build" and response.tool_calls == []


def test_routing_with_no_choices_says_done_only_when_allowed():
    assert run(ModelRequest("mock", "m", purpose="routing", allow_done=True)).text == "DONE"
    assert run(ModelRequest("mock", "m", purpose="routing", allow_done=False)).text != "DONE"


def test_summary_is_one_line():
    response = run(ModelRequest("mock", "m", purpose="summary", stage="plan", messages=[Message("user", "a"), Message("assistant", "b")]))
    assert response.text and "\n" not in response.text and "plan" in response.text


def test_submit_output_comes_first_when_offered():
    response = run(stage_request(["list_dir", "fan_out", "submit_output"], output_format="json"))
    (call,) = response.tool_calls
    assert call.name == "submit_output"
    assert isinstance(json.loads(call.arguments["content"])["summary"], str)


@pytest.mark.parametrize("fmt", ["markdown", "csv", "xml", "yaml", "toml", "text", None, "a2ui"])
def test_submit_output_content_parses_in_its_format(fmt):
    content = run(stage_request(["submit_output"], output_format=fmt)).tool_calls[0].arguments["content"]
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(content)))
        assert rows[0] == ["stage", "summary"] and len(rows) == 2
    elif fmt == "xml":
        assert ET.fromstring(content).tag == "result"
    elif fmt == "yaml":
        assert yaml.safe_load(content)["summary"] == "dry run"
    elif fmt == "toml":
        assert tomllib.loads(content)["stage"] == "work"
    elif fmt == "markdown":
        assert content.startswith("# ")
    else:
        assert "work" in content


def test_submit_output_satisfies_schema_in_the_tool_description():
    schema = {"type": "object", "required": ["count", "files"], "properties": {
        "count": {"type": "integer", "minimum": 2},
        "files": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    }}
    description = "Submit.\n\nReturn it in this format: json.\n\nIt must be JSON valid against this schema:\n" + json.dumps(schema) + "\n\nThis governs..."
    request = stage_request([], output_format="json")
    request.tools = [spec("submit_output", description)]
    value = json.loads(run(request).tool_calls[0].arguments["content"])
    assert value == {"count": 2, "files": ["mock answer"]}


def test_after_a_successful_submission_the_mock_finishes_with_text():
    messages = [
        Message("user", "task"),
        Message("assistant", [ToolUseBlock("s1", "submit_output", {"content": "x"})]),
        Message("user", [ToolResultBlock("s1", "Final output recorded.")]),
    ]
    response = run(stage_request(["submit_output", "list_dir"], messages))
    assert response.tool_calls == [] and response.text


def test_a_failed_submission_is_retried():
    messages = [
        Message("user", "task"),
        Message("assistant", [ToolUseBlock("s1", "submit_output", {"content": "x"})]),
        Message("user", [ToolResultBlock("s1", "[error] not valid JSON", is_error=True)]),
    ]
    assert run(stage_request(["submit_output"], messages)).tool_calls[0].name == "submit_output"


def test_fan_out_with_three_items_when_offered_and_not_called():
    (call,) = run(stage_request(["list_dir", "fan_out"])).tool_calls
    assert call.name == "fan_out"
    items = call.arguments["items"]
    assert len(items) == 3 and all(set(i) == {"id", "context"} and isinstance(i["context"], dict) for i in items)
    assert len({i["id"] for i in items}) == 3


def test_fan_out_is_not_repeated():
    messages = [
        Message("user", "task"),
        Message("assistant", [ToolUseBlock("f", "fan_out", {"items": []})]),
        Message("user", [ToolResultBlock("f", "[fan_out results: 3 succeeded, 0 failed]")]),
    ]
    assert run(stage_request(["fan_out", "list_dir"], messages)).tool_calls == []


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        (["shell", "current_time", "list_dir"], "list_dir"),
        (["shell", "context_list", "current_time"], "current_time"),
        (["write_file", "runtime_info", "context_list"], "context_list"),
        (["write_file", "runtime_info"], "runtime_info"),
    ],
)
def test_harmless_tool_preference(tools, expected):
    (call,) = run(stage_request(tools)).tool_calls
    assert call.name == expected


def test_no_harmless_tool_means_text():
    response = run(stage_request(["shell", "write_file"]))
    assert response.tool_calls == [] and "work" in response.text


def test_after_a_tool_result_the_mock_finishes():
    messages = [
        Message("user", "task"),
        Message("assistant", [ToolUseBlock("l", "list_dir", {"path": "."})]),
        Message("user", [ToolResultBlock("l", "a.txt (3B)")]),
    ]
    assert run(stage_request(["list_dir"], messages)).tool_calls == []


def test_tool_called_since_last_user_text_is_not_called_again():
    messages = [
        Message("user", "task"),
        Message("assistant", [ToolUseBlock("l", "list_dir", {})]),
        Message("user", [ToolResultBlock("l", "x")]),
        Message("assistant", "thinking"),
    ]
    assert run(stage_request(["list_dir"], messages)).tool_calls == []


def test_new_user_text_allows_one_more_look():
    messages = [
        Message("user", "task"),
        Message("assistant", [ToolUseBlock("l", "list_dir", {})]),
        Message("user", [ToolResultBlock("l", "x")]),
        Message("assistant", "done"),
        Message("user", [TextBlock("[Stage instructions: review]")]),
    ]
    assert run(stage_request(["list_dir"], messages)).tool_calls[0].name == "list_dir"


def test_usage_is_estimated():
    response = run(stage_request([], [Message("user", "x" * 400)]))
    assert response.usage.prompt_tokens == 100 and response.usage.completion_tokens > 0


# ------------------------------------------------------------------------------------------------
# What the stage owes (request.duties): the mock does it before anything else
# ------------------------------------------------------------------------------------------------
def test_the_mock_meets_what_the_stage_owes_in_one_batch():
    from lev_nb.messages import StageDuties
    from lev_nb.providers.mock import MOCK_CHANGE_FILE

    duties = StageDuties(regions=["plan", "labels"], modify_files=True, open_items=[("todo", 2)])
    response = run(stage_request(["context_write", "write_file", "todo_done", "submit_output"], duties=duties))
    calls = [(c.name, c.arguments.get("region"), c.arguments.get("path"), c.arguments.get("id"))
             for c in response.tool_calls]
    assert calls == [("context_write", "plan", None, None), ("context_write", "labels", None, None),
                     ("write_file", None, MOCK_CHANGE_FILE, None), ("todo_done", "todo", None, 2)]


def test_the_mock_gives_up_on_a_duty_it_tried_twice():
    from lev_nb.messages import StageDuties

    tried = []
    for i in range(2):
        tried += [Message("assistant", [ToolUseBlock(f"w{i}", "context_write", {"region": "plan", "content": "x"})]),
                  Message("user", [ToolResultBlock(f"w{i}", "[denied] not allowed", is_error=True)])]
    request = stage_request(["context_write", "submit_output"], messages=[Message("user", "go"), *tried],
                            duties=StageDuties(regions=["plan"]))
    (call,) = run(request).tool_calls
    assert call.name == "submit_output"  # moves on instead of writing a third time


def test_a_duty_without_the_tool_for_it_is_left_to_the_engine():
    from lev_nb.messages import StageDuties

    response = run(stage_request([], duties=StageDuties(regions=["plan"], modify_files=True)))
    assert response.tool_calls == [] and "done" in response.text


def test_a_stage_that_would_nudge_a_text_answer_gets_a_harmless_tool_call():
    from lev_nb.messages import StageDuties

    messages = [Message("user", "go"), Message("assistant", [ToolUseBlock("a", "write_file", {"path": "x"})]),
                Message("user", [ToolResultBlock("a", "Wrote 1 byte")])]  # the last stage ended on a tool result
    assert run(stage_request(["list_dir"], messages=messages)).tool_calls == []
    (call,) = run(stage_request(["list_dir"], messages=messages, duties=StageDuties(use_a_tool=True))).tool_calls
    assert call.name == "list_dir"
