"""JSON Schema validators, compiled once: for tool arguments, script tools and final outputs.

``jsonschema`` is imported on first use, not with lev_nb: with the optional format checkers installed
(JupyterLab brings them) its import takes about a second, which would otherwise land on the first
``bp.run`` of a notebook. :func:`warm_up` starts that import in the background, for runs that
will need it; :func:`certainly_valid` passes plain tool arguments without it.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from typing import Any

__all__ = ["certainly_valid", "compile_schema", "schema_problem", "set_warm_up", "warm_up"]

JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
# Keywords that only annotate a schema: they never make a value invalid.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
_SIMPLE_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def certainly_valid(schema: Any, value: Any) -> bool:
    """True when ``value`` is valid against ``schema`` by a quick check of the plain schemas tools
    use (types, properties, required, items, enum, additionalProperties); False when it is not or
    when the schema uses anything else, so that only jsonschema's verdict and messages count.

    Checking a tool call's arguments this way skips jsonschema for the common case, whose import
    alone takes up to a couple of seconds (issue 15, "instant start").
    """
    if not isinstance(schema, dict):
        return schema is True
    kind = schema.get("type")
    for key in schema:
        if key not in _ANNOTATIONS and key not in ("type", "properties", "required", "items", "enum",
                                                   "additionalProperties"):
            return False
    if "enum" in schema:
        choices = schema["enum"]
        if not isinstance(choices, list) or not any(type(c) is type(value) and c == value for c in choices):
            return False
    if kind is None:
        return not set(schema) - _ANNOTATIONS - {"enum"}
    if not isinstance(kind, str):
        return False
    if kind in _SIMPLE_TYPES:
        return set(schema) - _ANNOTATIONS <= {"type", "enum"} and _SIMPLE_TYPES[kind](value)
    if kind == "array":
        if not isinstance(value, list) or set(schema) - _ANNOTATIONS - {"type", "items"}:
            return False
        items = schema.get("items", True)
        return all(certainly_valid(items, item) for item in value)
    if kind != "object" or not isinstance(value, dict) or "items" in schema or "enum" in schema:
        return False
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(extra, bool):
        return False
    if any(name not in value for name in required):
        return False
    for name, item in value.items():
        if name in properties:
            if not certainly_valid(properties[name], item):
                return False
        elif not extra:
            return False
    return True


def compile_schema(schema: dict[str, Any]) -> tuple[Any | None, str | None]:
    """``(validator, None)`` for a usable schema; ``(None, why)`` when the schema itself is broken."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        return None, f"it cannot be written as JSON ({exc})"
    return _compiled(key)


@lru_cache(maxsize=512)
def _compiled(schema_json: str) -> tuple[Any | None, str | None]:
    import jsonschema

    schema = json.loads(schema_json)
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = ".".join(str(p) for p in exc.path)
        message = exc.message
        if exc.path and exc.path[-1] == "type" and isinstance(exc.instance, str):
            message = f"type = \"{exc.instance}\" is not a JSON Schema type (one of {', '.join(JSON_TYPES)})"
        return None, (f"at {where}: " if where else "") + message
    return cls(schema), None


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (starting with the path inside it, as in
    ``at properties.n.type: ...``), or None when it is."""
    if not isinstance(schema, (dict, bool)):
        return f"a schema is a table (an object), not {type(schema).__name__}"
    if isinstance(schema, bool):
        return None
    return compile_schema(schema)[1]


_warming = threading.Lock()
_warmed = False


def set_warm_up(enabled: bool) -> None:
    """Turn :func:`warm_up` on or off for this process. A batch worker turns it off: the import
    costs seconds of CPU (the format checkers' grammars) that would compete with the worker's
    runs, and a worker is there for throughput, not for the first check's latency."""
    global _warmed
    with _warming:
        _warmed = not enabled


def warm_up() -> None:
    """Import jsonschema on a background thread (once per process), so the first check that needs
    it does not wait for it. Called when a run is started that will check a schema (a JSON Schema
    for its answer, script tools): the import holds the interpreter lock much of its time, so it
    is not started for runs that never need it."""
    global _warmed
    with _warming:
        if _warmed:
            return
        _warmed = True
    threading.Thread(target=_import, name="lev-warm-up", daemon=True).start()


def _import() -> None:
    try:
        import jsonschema  # noqa: F401
    except Exception:  # nothing to warm: the first check reports the problem itself
        pass
