"""The JSON Schema of the blueprint format, generated from the pydantic models (``lev schema``)."""

from __future__ import annotations

from typing import Any

from .model import Blueprint

# Fields the loader fills from the table's key, not from a TOML key inside the table.
_DERIVED = {"Stage": "name", "Region": "name", "Edge": "target"}


def json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) for an ``agent.leviath`` file, with TOML key names."""
    schema = Blueprint.model_json_schema(by_alias=True, mode="serialization")
    schema["title"] = "lev_nb agent blueprint (agent.leviath)"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("required", [])
    if "agent" not in schema["required"]:
        schema["required"].append("agent")
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
