"""JSON Schema validators, compiled once: for tool arguments, script tools and final outputs.

``jsonschema`` is imported on first use, not with lev_nb, and by :func:`load_jsonschema`: at its
import, jsonschema's format module imports every optional format library it finds, and one of them
(``rfc3987_syntax``, which JupyterLab brings) compiles a grammar at import, 1.5-3 s of CPU. lev_nb's
validators check no formats, so the costly ones (:data:`DEFERRED_FORMAT_LIBRARIES`) are given to
jsonschema as stand-ins that load the real library on the first check a user's own format checker
makes (``iri``, ``duration``). :func:`warm_up` starts the import in the background, for runs that
will need it; :func:`certainly_valid` passes plain tool arguments without it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import threading
import types
from functools import lru_cache
from typing import Any

__all__ = ["certainly_valid", "compile_schema", "load_jsonschema", "schema_problem", "set_warm_up", "warm_up"]

# Optional format libraries that jsonschema imports eagerly and that cost far more than they are
# worth to a validator that checks no formats: module -> (the functions jsonschema calls, the
# exceptions it expects from them). rfc3987_syntax compiles a grammar (1.5-3 s); isoduration
# brings arrow and dateutil (about 70 ms).
DEFERRED_FORMAT_LIBRARIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rfc3987_syntax": (("is_valid_syntax",), ()),
    "isoduration": (("parse_duration",), ("DurationParsingException",)),
}

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


class _Deferred(types.ModuleType):
    """Stands in for an optional library while jsonschema imports: its functions load the real
    library on their first call, its exceptions are stand-ins that the functions raise (chained
    to the real one), and any other attribute loads the library at once."""

    def __init__(self, name: str, functions: tuple[str, ...], exceptions: tuple[str, ...]) -> None:
        super().__init__(name)
        for exception in exceptions:
            setattr(self, exception, type(exception, (ValueError,), {"__module__": name}))
        for function in functions:
            setattr(self, function, self._later(function, exceptions))

    def _later(self, function: str, exceptions: tuple[str, ...]) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            real = self._real()
            try:
                return getattr(real, function)(*args, **kwargs)
            except Exception as exc:
                for exception in exceptions:  # what jsonschema was told to expect, it gets
                    if isinstance(exc, getattr(real, exception)):
                        raise getattr(self, exception)(*exc.args) from exc
                raise

        call.__name__ = function
        return call

    def _real(self) -> types.ModuleType:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return importlib.import_module(self.__name__)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's own questions (__path__, __spec__, ...)
            raise AttributeError(name)
        return getattr(self._real(), name)


_importing = threading.Lock()


def load_jsonschema() -> types.ModuleType:
    """``jsonschema``, imported without the grammar compiles of :data:`DEFERRED_FORMAT_LIBRARIES`
    (each installed one is loaded when a format check first needs it; nothing else changes)."""
    with _importing:
        if "jsonschema" in sys.modules:
            return sys.modules["jsonschema"]
        standing_in: list[str] = []
        for name, (functions, exceptions) in DEFERRED_FORMAT_LIBRARIES.items():
            if name not in sys.modules and importlib.util.find_spec(name) is not None:
                sys.modules[name] = _Deferred(name, functions, exceptions)
                standing_in.append(name)
        try:
            import jsonschema
        finally:
            # Later imports of the library (the user's own) get the real one.
            for name in standing_in:
                if isinstance(sys.modules.get(name), _Deferred):
                    del sys.modules[name]
        return jsonschema


@lru_cache(maxsize=512)
def _compiled(schema_json: str) -> tuple[Any | None, str | None]:
    jsonschema = load_jsonschema()

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
    costs CPU (a tenth of a second, more where :func:`load_jsonschema` cannot spare the format
    libraries) that would compete with the worker's runs, and a worker is there for throughput,
    not for the first check's latency."""
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
        load_jsonschema()
    except Exception:  # nothing to warm: the first check reports the problem itself
        pass
