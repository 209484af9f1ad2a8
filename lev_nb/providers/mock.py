"""MockModel: a stage-aware dry run that walks any blueprint to its end without a key.

It is stateless: every answer is decided from the request alone, so one instance can serve any
number of runs. The rules, in order, for a stage turn:

1. The stage still owes something the engine names in ``request.duties`` (a required region, a
   region a gate wants written or revised, a file change, open checklist items) -> do what it can
   in one batch with the tools offered: ``context_write`` each region, ``write_file`` one small
   file (``lev-mock-change.txt``), ``todo_done`` each item; at most twice each, so a refused call
   is not repeated forever. A well-formed agent's dry run then passes its gates as a real run
   would, instead of being held and forced.
2. ``submit_output`` offered and no successful submission yet -> submit a small answer in the
   stage's output format (JSON that satisfies the schema named in the tool description, if any).
3. ``fan_out`` offered and not yet called -> fan out three items.
4. A harmless read-only tool is offered, and either the stage would nudge an answer in text alone
   (``duties.use_a_tool``) or the last message is not a tool result and no tool was called since
   the last user text -> call that tool once.
5. Otherwise finish with a short text.

Routing picks the first candidate (DONE only when there is no candidate and DONE is allowed); a
summary request gets a one-line summary.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from lev_nb.messages import Message, ModelRequest, ModelResponse, TextBlock, ToolCall, ToolResultBlock, ToolUseBlock, Usage, request_text
from lev_nb.text import estimate_tokens

__all__ = ["MockModel", "sample_output", "sample_for_schema"]

# Read-only tools the mock may poke once per user turn, most useful first (context_read reads the
# first region the system prompt shows, under its "## <region>" heading).
_HARMLESS_TOOLS = ("list_dir", "current_time", "context_list", "runtime_info", "context_read")
_REGION_HEADING = re.compile(r"## ([A-Za-z0-9_.-]+)\n")
_FAILURE_PREFIXES = ("[error]", "[denied]", "[unavailable]", "[blocked]", "[timed out]")
_SCHEMA_MARKER = "It must be JSON valid against this schema:\n"
# The file the mock writes when a gate asks the stage for a file change.
MOCK_CHANGE_FILE = "lev-mock-change.txt"
_DUTY_TRIES = 2


def sample_for_schema(schema: Any, depth: int = 0) -> Any:
    """A small value that satisfies common JSON Schema constraints (best effort, never raises)."""
    if not isinstance(schema, dict) or depth > 8:
        return "mock"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return sample_for_schema(options[0], depth + 1)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            if isinstance(part, dict):
                merged.update(part)
        return sample_for_schema(merged, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required", []) if isinstance(schema.get("required"), list) else []
        value = {name: sample_for_schema(props.get(name, {}), depth + 1) for name in required}
        if not value and "summary" in props:
            value["summary"] = sample_for_schema(props["summary"], depth + 1)
        return value
    if kind == "array":
        count = max(int(schema.get("minItems", 1) or 0), 0)
        return [sample_for_schema(schema.get("items", {}), depth + 1) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return schema.get("minimum", 1.0)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = "mock answer"
    min_len = schema.get("minLength")
    if isinstance(min_len, int) and len(text) < min_len:
        text = text + "." * (min_len - len(text))
    max_len = schema.get("maxLength")
    if isinstance(max_len, int):
        text = text[:max_len]
    return text


def _schema_from_description(description: str) -> Any:
    """Pull the JSON Schema the engine wrote into submit_output's description, if any."""
    start = description.find(_SCHEMA_MARKER)
    if start < 0:
        return None
    body = description[start + len(_SCHEMA_MARKER):]
    decoder = json.JSONDecoder()
    try:
        schema, _ = decoder.raw_decode(body.lstrip())
    except json.JSONDecodeError:
        return None
    return schema


def sample_output(output_format: str | None, stage: str, schema: Any = None) -> str:
    """A small answer in the named output format (text when the format is unknown)."""
    fmt = (output_format or "text").strip().lower()
    note = f"Dry run of stage '{stage}'."
    if fmt == "json" or fmt.endswith("+json") or fmt == "application/json":
        value = sample_for_schema(schema) if isinstance(schema, dict) else {"summary": note}
        return json.dumps(value)
    if fmt in ("markdown", "md", "text/markdown"):
        return f"# Mock result\n\n{note}\n"
    if fmt in ("csv", "text/csv"):
        return f"stage,summary\n{stage},dry run\n"
    if fmt in ("xml", "application/xml", "text/xml"):
        return f"<result><stage>{stage}</stage><summary>dry run</summary></result>"
    if fmt in ("yaml", "yml", "application/yaml"):
        return f"summary: dry run\nstage: {json.dumps(stage)}\n"
    if fmt == "toml":
        return f"summary = \"dry run\"\nstage = {json.dumps(stage)}\n"
    return note


def _is_failure(content: str) -> bool:
    """True when a tool result reports that the call had no effect."""
    return content.lstrip().startswith(_FAILURE_PREFIXES)


def _tool_uses(messages: list[Message]) -> list[ToolUseBlock]:
    """Every tool_use block in the conversation, in order."""
    return [b for m in messages if m.role == "assistant" for b in m.blocks() if isinstance(b, ToolUseBlock)]


def _results_by_id(messages: list[Message]) -> dict[str, ToolResultBlock]:
    """Tool results keyed by the tool_use id they answer."""
    return {
        b.tool_use_id: b
        for m in messages
        if m.role == "user"
        for b in m.blocks()
        if isinstance(b, ToolResultBlock)
    }


def _submitted(messages: list[Message]) -> bool:
    """True once a submit_output call got a successful result."""
    results = _results_by_id(messages)
    for use in _tool_uses(messages):
        if use.name == "submit_output":
            result = results.get(use.id)
            if result is not None and not result.is_error and not _is_failure(result.content):
                return True
    return False


def _called_since_last_user_text(messages: list[Message]) -> bool:
    """True when the assistant called any tool after the most recent user text."""
    for message in reversed(messages):
        if message.role == "user" and any(isinstance(b, TextBlock) and b.text for b in message.blocks()):
            return False
        if message.role == "assistant" and any(isinstance(b, ToolUseBlock) for b in message.blocks()):
            return True
    return False


def _last_is_tool_result(messages: list[Message]) -> bool:
    """True when the newest message carries a tool result."""
    if not messages:
        return False
    last = messages[-1]
    return last.role == "user" and any(isinstance(b, ToolResultBlock) for b in last.blocks())


def _duty_calls(request: ModelRequest, offered: set[str]) -> list[ToolCall]:
    """The tool calls that meet what the stage still owes (``request.duties``), as far as the offered
    tools allow; each the mock already tried twice is left out, so a refused one is not repeated."""
    duties = request.duties
    if not duties:
        return []
    n = len(request.messages)
    tried = [(u.name, u.input.get("region"), u.input.get("id"), u.input.get("path")) for u in _tool_uses(request.messages)]
    calls: list[ToolCall] = []
    writer = next((t for t in ("context_write", "context_append") if t in offered), None)
    if writer is not None:
        for region in duties.regions:
            if sum(1 for name, r, _, _ in tried if name == writer and r == region) < _DUTY_TRIES:
                content = f"Dry-run entry for '{region}' from the mock model in stage '{request.stage}' (turn {n})."
                args = {"region": region, "content": content, "key": "mock"}
                calls.append(ToolCall(f"mock-{n}-{writer}-{region}", writer, args))
    if duties.modify_files and "write_file" in offered:
        if sum(1 for name, _, _, p in tried if name == "write_file" and p == MOCK_CHANGE_FILE) < _DUTY_TRIES:
            content = f"A change made by lev_nb's mock model in stage '{request.stage}' during a dry run.\n"
            calls.append(ToolCall(f"mock-{n}-write-file", "write_file", {"path": MOCK_CHANGE_FILE, "content": content}))
    if "todo_done" in offered:
        for region, item in duties.open_items:
            if sum(1 for name, r, i, _ in tried if name == "todo_done" and r == region and i == item) < _DUTY_TRIES:
                calls.append(ToolCall(f"mock-{n}-todo-{region}-{item}", "todo_done", {"region": region, "id": item}))
    return calls


class MockModel:
    """A key-free stand-in for a real model that drives any blueprint to its end.

    ``latency_s`` is awaited before every answer, to make dry runs behave like real ones in time.
    """

    name = "mock"

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request following the rules in the module docstring."""
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        calls: list[ToolCall]
        if request.purpose == "routing":
            text, calls = self._route(request), []
        elif request.purpose == "summary":
            text, calls = self._summarise(request), []
        else:
            text, calls = self._stage_turn(request)
        out = text + "".join(json.dumps(c.arguments) for c in calls)
        usage = Usage(prompt_tokens=estimate_tokens(request_text(request)), completion_tokens=estimate_tokens(out))
        return ModelResponse(text=text, tool_calls=calls, usage=usage, finish_reason="tool_use" if calls else "complete")

    @staticmethod
    def _route(request: ModelRequest) -> str:
        """The first candidate; DONE only when nothing else is offered and DONE is allowed."""
        if request.choices:
            return request.choices[0]
        return "DONE" if request.allow_done else ""

    @staticmethod
    def _summarise(request: ModelRequest) -> str:
        """A one-line summary that says what it covers."""
        count = len(request.messages)
        return f"Mock summary of stage '{request.stage}': {count} message(s) condensed."

    def _stage_turn(self, request: ModelRequest) -> tuple[str, list[ToolCall]]:
        """Pick the next action of a stage turn."""
        offered = {t.name: t for t in request.tools}
        messages = request.messages
        n = len(messages)
        duty_calls = _duty_calls(request, set(offered))
        if duty_calls:
            return "Doing what this stage asks for first.", duty_calls
        if "submit_output" in offered and not _submitted(messages):
            schema = request.output_schema or request.extra.get("output_schema")
            if schema is None:
                schema = _schema_from_description(offered["submit_output"].description)
            content = sample_output(request.output_format, request.stage, schema)
            return "Submitting the answer.", [ToolCall(f"mock-{n}-submit", "submit_output", {"content": content})]
        if "fan_out" in offered and not any(u.name == "fan_out" for u in _tool_uses(messages)):
            items = [{"id": f"item-{i}", "context": {"part": i, "of": 3}} for i in range(1, 4)]
            return "Splitting the work.", [ToolCall(f"mock-{n}-fan-out", "fan_out", {"items": items})]
        fresh = not _last_is_tool_result(messages) and not _called_since_last_user_text(messages)
        if fresh or (request.duties is not None and request.duties.use_a_tool):
            used = [u.name for u in _tool_uses(messages)]
            for name in _HARMLESS_TOOLS:
                # At most twice in view: a third identical call would itself read as a loop.
                if name in offered and used.count(name) < 2:
                    args: dict[str, Any] = {"path": "."} if name == "list_dir" else {}
                    if name == "context_read":
                        heading = next((m for block in request.system if (m := _REGION_HEADING.match(block))), None)
                        if heading is None:
                            continue
                        args = {"region": heading.group(1)}
                    return "Looking around first.", [ToolCall(f"mock-{n}-{name}", name, args)]
        return f"Stage '{request.stage}' is done (mock model).", []
