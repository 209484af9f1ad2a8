"""The JSON Schema of the blueprint format, generated from the blueprint's tables (``lev schema``)."""

from __future__ import annotations

import copy
import functools
import inspect
import types
import typing
from typing import Any

from .model import Blueprint
from .table import Table

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
    defs: dict[str, Any] = {}
    schema = _table_schema(Blueprint, defs)
    schema["$defs"] = dict(sorted(defs.items()))
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


# -- from a table's annotations to JSON Schema ------------------------------------------------------
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _is_table_hint(hint: Any) -> bool:
    """A table, or an optional table: its key gets no title (the table's own schema has one)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_is_table_hint(a) for a in typing.get_args(hint) if a is not type(None))
    return isinstance(hint, type) and issubclass(hint, Table)


def _type_schema(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of one type annotation; tables go to ``defs`` and are referenced."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [{"type": "null"} if a is type(None) else _type_schema(a, defs) for a in args]}
    if origin is typing.Literal:
        out: dict[str, Any] = {"enum": list(args)}
        if all(isinstance(a, str) for a in args):
            out["type"] = "string"
        return out
    if origin is list:
        return {"items": _type_schema(args[0], defs), "type": "array"}
    if origin is dict:
        value = args[1] if args else Any
        return {"additionalProperties": True if value is Any else _type_schema(value, defs), "type": "object"}
    if isinstance(hint, type) and issubclass(hint, Table):
        if hint.__name__ not in defs:
            defs[hint.__name__] = {}  # placeholder: a table may (indirectly) contain itself
            defs[hint.__name__] = _table_schema(hint, defs)
        return {"$ref": f"#/$defs/{hint.__name__}"}
    if hint is Any:
        return {}
    return {"type": _SCALARS[hint]}


def _table_schema(cls: type[Table], defs: dict[str, Any]) -> dict[str, Any]:
    """A table's object schema: its keys as the TOML spells them, their types and defaults."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in cls.model_fields.items():
        if spec.exclude:
            continue
        hint = spec.annotation
        prop = _type_schema(hint, defs)
        if spec.is_required():
            required.append(spec.alias or name)
        elif spec.default_factory is None:
            prop["default"] = spec.default
        if not _is_table_hint(hint):
            prop["title"] = (spec.alias or name).replace("_", " ").title()
        if spec.description:
            prop["description"] = spec.description
        properties[spec.alias or name] = prop
    out: dict[str, Any] = {
        "additionalProperties": cls.model_config["extra"] == "allow",
        "properties": properties,
        "title": cls.__name__,
        "type": "object",
    }
    if cls.__doc__:
        out["description"] = inspect.cleandoc(cls.__doc__)
    if required:
        out["required"] = required
    return out
