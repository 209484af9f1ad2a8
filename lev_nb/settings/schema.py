"""The shape of ``config.toml``, read off the typed settings in :mod:`lev_nb.settings.model`.

:data:`SCHEMA` is a tree of :class:`Table` (a dataclass), :class:`MapOf` (a table of user-named
entries) and :class:`Value` (a key with a type). :data:`ENVIRONMENT` lists every environment
variable that sets a key, in one place, so ``lev config`` and the README name the same ones.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Union

from lev_nb.records import evaluated_annotation, record

from .mcp_servers import McpServer
from .model import Policy, ScriptPermission, Settings

__all__ = ["ENVIRONMENT", "SCHEMA", "Key", "MapOf", "Node", "Table", "Value", "static_keys"]

Key = tuple[str, ...]


@record
class Value:
    """A key with a value: ``type`` is str, int, float, bool, str_list, policy, table (free-form) or
    mcp_servers (the ``[[mcp_servers]]`` array of tables)."""

    type: str
    default: Any = None
    nullable: bool = False
    env: str | None = None
    minimum: int | None = None
    doc: str = ""


@record
class Table:
    """A ``[table]`` with a fixed set of keys (unknown keys are errors)."""

    cls: type
    fields: Mapping[str, Node]


@record
class MapOf:
    """A table whose keys the user names (an agent, a tool, a provider); each value is ``item``."""

    item: Node
    key: str


Node = Value | Table | MapOf

_KEY_NAMES = {
    "model_providers": "provider",
    "tool_permissions": "tool",
    "agent_tool_permissions": "agent",
    "agent_safe_commands": "agent",
    "agent_read_paths": "agent",
    "prices": "model",
    "rate_limits": "provider",
    "max_concurrent_inferences_by_model": "model",
    "max_concurrent_inferences_by_provider": "provider",
    "model_capabilities": "model",
}


def _field_types(cls: type) -> dict[str, Any]:
    """The evaluated annotations of ``cls`` and its bases, each in its own module, as
    ``typing.get_type_hints`` gives them for these classes. Every process that reads the
    configuration builds the schema, and get_type_hints' general machinery was most of its cost."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in klass.__dict__.get("__annotations__", {}).items():
            found[name] = evaluated_annotation(klass, annotation)
    return found


def _table(cls: type) -> Table:
    hints = _field_types(cls)
    nodes: dict[str, Node] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        nodes[f.name] = _node(f.name, hints[f.name], f)
    return Table(cls, nodes)


def _node(name: str, hint: Any, f: dataclasses.Field[Any] | None) -> Node:
    meta = f.metadata if f is not None else {}
    default = None
    if f is not None and f.default is not dataclasses.MISSING:
        default = f.default
    nullable = False
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        hint = args[0]
        origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return _table(hint)  # type: ignore[arg-type]
    if origin is Mapping or origin is dict:
        _, item = typing.get_args(hint)
        if item is Any:
            kind = "table"
        else:
            return MapOf(_node(name, item, None), _KEY_NAMES.get(name, "tool"))
    elif hint is Policy:
        kind = "policy"
    elif origin is tuple and typing.get_args(hint)[0] is McpServer:
        kind = "mcp_servers"
    elif hint is ScriptPermission:
        kind = "script_permission"
    elif origin is tuple:
        kind = "str_list"
    elif hint is bool:
        kind = "bool"
    elif hint is int:
        kind = "int"
    elif hint is float:
        kind = "float"
    elif hint is str:
        kind = "str"
    else:  # pragma: no cover - a type the format does not use
        raise TypeError(f"settings field {name!r}: unsupported type {hint!r}")
    return Value(kind, default=default, nullable=nullable, env=meta.get("env"),
                 minimum=meta.get("minimum"), doc=meta.get("doc", ""))


SCHEMA: Table = _table(Settings)


def static_keys(node: Node = SCHEMA, prefix: Key = ()) -> Iterator[tuple[Key, Value]]:
    """Every key of a fixed table (not under a user-named map), depth first, in declaration order."""
    if isinstance(node, Table):
        for name, child in node.fields.items():
            yield from static_keys(child, prefix + (name,))
    elif isinstance(node, Value):
        yield prefix, node


def _environment() -> tuple[tuple[str, Key], ...]:
    found = [(v.env, key) for key, v in static_keys() if v.env]
    # The Anthropic SDK's own variable, read as the built-in provider's base_url so that it sits
    # in the same order as every other override (environment over file).
    found.append(("ANTHROPIC_BASE_URL", ("model_providers", "anthropic", "base_url")))
    return tuple(found)


ENVIRONMENT: tuple[tuple[str, Key], ...] = _environment()
