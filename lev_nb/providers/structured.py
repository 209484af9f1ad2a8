"""Structured output: having the model's server hold a stage's final answer to its JSON Schema.

The engine collects a stage's final answer through the ``submit_output`` tool, whose ``content`` is
a string the engine checks against the stage's output schema. A server that constrains tool
arguments to their schema (``strict`` tools: OpenAI's function tools and the compatible servers
that copy them, Anthropic's tools) can do better: it can only emit an answer that fits.
:func:`constrained_submit_tool` builds that tool, with ``content`` typed as the schema itself, when
the schema is one strict mode can hold (:func:`strict_schema`); the answer then comes back as a
JSON value, which :func:`unpack_submission` turns into the JSON text the engine's checks read, so
the engine sees the same ``submit_output`` call whichever way it was asked.

Strict mode takes a subset of JSON Schema: every object lists all its properties as required and
allows no others, and only some keywords are known (a few fewer for Anthropic, which has no numeric
bounds). A schema outside that subset is left to the engine's own check (the answer is still
refused when it does not fit); a schema whose only gap is a missing ``additionalProperties`` gets
``false`` added, which narrows what the model may write to answers the schema accepts anyway.

:func:`ask_structured` is the one rule both providers follow: ask with the strict tool; when the
server refuses it (a 400 or 422 that names the schema or the flag), ask once more without it, do
not ask that server and model with it again in this process, and attach an ``output-unconstrained``
warning to the answer so the run tells the person.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from lev_nb.providers.base import ProviderError

from lev_nb.messages import ModelRequest, ModelResponse, ToolCall, ToolSpec

__all__ = [
    "SUBMIT_TOOL", "Dialect", "SchemaRefused", "strict_schema", "constrained_submit_tool", "unpack_submission",
    "is_schema_refusal", "ask_structured",
]

SUBMIT_TOOL = "submit_output"

# The keywords strict mode compiles (OpenAI's structured-outputs guide, "Supported schemas").
_KNOWN = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "$ref", "$defs", "definitions", "description", "title", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "$schema",
})
# Anthropic's strict tools take no numeric or item-count bounds (only minItems 0 or 1).
_NOT_ANTHROPIC = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "maxItems"})
Dialect = Literal["openai", "anthropic"]
_LOCAL_REFS = ("#/$defs/", "#/definitions/")
# Words of a 400 answer that blames the schema or the strict flag, not the rest of the request.
_SCHEMA_WORDS = ("schema", "strict", "additionalproperties", "json_schema", "response_format", "grammar", "guided",
                 "structured output")


def strict_schema(schema: Any, dialect: Dialect = "openai") -> dict[str, Any] | None:
    """``schema`` as strict mode takes it (a copy, ``additionalProperties: false`` added to each
    object that did not say), or None when strict mode cannot hold it: an unknown keyword (for the
    ``dialect``'s server), an object with an optional property, free-form keys or no properties."""
    if not isinstance(schema, dict) or not schema:
        return None
    out = copy.deepcopy(schema)
    known = _KNOWN - _NOT_ANTHROPIC if dialect == "anthropic" else _KNOWN
    return out if _tighten(out, known) else None


def _tighten(node: Any, known: frozenset[str]) -> bool:
    """Check and fix one schema node in place; False when strict mode cannot hold it."""
    if not isinstance(node, dict):
        return False
    if any(key not in known for key in node):
        return False
    ref = node.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith(_LOCAL_REFS)):
        return False  # only refs into the schema's own $defs survive the move under `content`
    if "minItems" in node and known is not _KNOWN and node["minItems"] not in (0, 1):
        return False
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types) or "properties" in node
    if is_object:
        properties = node.get("properties")
        if not isinstance(properties, dict) or not properties:
            return False
        if set(node.get("required") or ()) != set(properties):
            return False
        extra = node.setdefault("additionalProperties", False)
        if extra is not False:
            return False
        if not all(_tighten(child, known) for child in properties.values()):
            return False
    if "items" in node and not _tighten(node["items"], known):
        return False
    if "anyOf" in node and not (isinstance(node["anyOf"], list) and all(_tighten(c, known) for c in node["anyOf"])):
        return False
    for key in ("$defs", "definitions"):
        if key in node and not (isinstance(node[key], dict) and all(_tighten(c, known) for c in node[key].values())):
            return False
    return True


def constrained_submit_tool(tool: ToolSpec, schema: Any, dialect: Dialect = "openai") -> ToolSpec | None:
    """The ``submit_output`` tool with ``content`` typed as ``schema`` (strict form), or None when
    strict mode cannot hold the schema (the tool is then offered as it was)."""
    held = strict_schema(schema, dialect)
    if held is None:
        return None
    held.pop("$schema", None)
    # A ref resolves against the whole tool schema: the definitions move up to its root.
    definitions: dict[str, Any] = {key: held.pop(key) for key in ("$defs", "definitions") if key in held}
    offered = (tool.parameters.get("properties") or {}).get("artifacts")
    artifacts = dict(offered or {"type": "array", "items": {"type": "string"}})
    artifacts.setdefault("description", "Files you produced for the caller (an empty list when none).")
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"content": held, "artifacts": artifacts},
        "required": ["content", "artifacts"],
        "additionalProperties": False,
        **definitions,
    }
    return ToolSpec(tool.name, tool.description, parameters)


def unpack_submission(call: ToolCall) -> ToolCall:
    """A ``submit_output`` call made with the constrained tool, as the engine reads one:
    ``content`` as JSON text (a JSON value in, its compact text out). Other calls pass as they are."""
    arguments = call.arguments or {}
    if call.name != SUBMIT_TOOL or "content" not in arguments or isinstance(arguments["content"], str):
        return call
    unpacked = dict(arguments)
    unpacked["content"] = json.dumps(arguments["content"], ensure_ascii=False)
    return ToolCall(call.id, call.name, unpacked)


def is_schema_refusal(status: int, body: str) -> bool:
    """True when an HTTP answer says the server would not take the schema or the strict flag (a
    400 or 422 whose text names them), so the call is worth one more try without them."""
    return status in (400, 422) and any(word in body.lower() for word in _SCHEMA_WORDS)


class SchemaRefused(Exception):
    """The server would not take the strict ``submit_output`` tool; ``error`` is what it said."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(error.message)
        self.error = error


# (provider, base URL, model) whose server refused a strict submit_output: not asked with one again.
_UNCONSTRAINED: set[tuple[str, str, str]] = set()


def wants_constraint(request: ModelRequest, server: tuple[str, str, str], dialect: Dialect) -> bool:
    """True when ``request`` should offer the strict ``submit_output``: the stage owes an answer
    with a schema strict mode can hold, offers the tool, and ``server`` never refused one."""
    return (request.output_schema is not None and server not in _UNCONSTRAINED
            and any(t.name == SUBMIT_TOOL for t in request.tools)
            and strict_schema(request.output_schema, dialect) is not None)


async def ask_structured(request: ModelRequest, server: tuple[str, str, str], dialect: Dialect, label: str,
                         send: Callable[[bool], Awaitable[ModelResponse]]) -> ModelResponse:
    """``send(constrain)`` with the strict ``submit_output`` when :func:`wants_constraint` says so
    (its answer unpacked), else without. ``send(True)`` raises :class:`SchemaRefused` when the
    server refuses the tool: then ``send(False)`` answers, ``server`` (provider, base URL, model)
    is remembered, and the answer carries an ``output-unconstrained`` warning."""
    if not wants_constraint(request, server, dialect):
        return await send(False)
    try:
        response = await send(True)
    except SchemaRefused as refused:
        response = await send(False)
        _UNCONSTRAINED.add(server)
        where = f" at {server[1]}" if server[1] else ""
        response.warnings.append((
            "output-unconstrained",
            f"the {label} server{where} would not hold the final answer of stage '{request.stage}' to its schema "
            f"as a strict tool ({refused.error.message}); {server[2]} was asked without it, and the answer is "
            "still checked against the schema",
        ))
        return response
    response.tool_calls = [unpack_submission(call) for call in response.tool_calls]
    return response
