"""The JSON Schema of the blueprint format, generated from the pydantic models (``lev schema``)."""

from __future__ import annotations

import copy
import functools
from typing import Any

from .model import Blueprint

# Fields the loader fills from the table's key, not from a TOML key inside the table.
_DERIVED = {"Stage": "name", "Region": "name", "Edge": "target"}


_STR_LIST = {"type": "array", "items": {"type": "string"}}
_SEED_SCHEMA: dict[str, Any] = {
    "description": "How a region is filled at spawn: a caller key (\"task_input\", \"input\" or any key), "
                   "or a table whose first recognized key wins.",
    "anyOf": [
        {"type": "string"},
        {
            "type": "object",
            "properties": {
                "glob": {"type": "string"}, "files": _STR_LIST, "literal": {"type": "string"},
                "rhai": {"type": "string"}, "command": {"type": "string"}, "tool": {"type": "string"},
                "args": {"type": "object"},
                "tools": {"type": "array", "items": {"anyOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
                     "required": ["name"]},
                ]}},
                "caller": {"type": "string"},
                "refresh": {"type": "string"},
            },
        },
    ],
}


def json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) for an ``agent.leviath`` file, with TOML key names."""
    return copy.deepcopy(_build_schema())


@functools.lru_cache(maxsize=1)
def _build_schema() -> dict[str, Any]:
    schema = Blueprint.model_json_schema(by_alias=True, mode="serialization")
    schema["title"] = "lev_nb agent blueprint (agent.leviath)"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("required", [])
    if "agent" not in schema["required"]:
        schema["required"].append("agent")
    if "Seed" in schema.get("$defs", {}):
        schema["$defs"]["Seed"] = _SEED_SCHEMA
    routing = schema.get("$defs", {}).get("ToolRouting")
    if routing is not None:  # an override may also be written as just the region name
        routing["properties"]["overrides"]["additionalProperties"] = {
            "anyOf": [{"type": "string"}, {"$ref": "#/$defs/RoutingOverride"}]}
    for name, field in _DERIVED.items():
        definition = schema.get("$defs", {}).get(name)
        if definition is None:
            continue
        definition.get("properties", {}).pop(field, None)
        if field in definition.get("required", []):
            definition["required"].remove(field)
            if not definition["required"]:
                definition.pop("required")
    return schema
