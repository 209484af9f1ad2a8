"""``[[mcp_servers]]``: the MCP tool servers this machine knows, as the upstream writes them.

Each entry is one server: a stdio one (``command``, ``args``, ``env``) or an HTTP one (``url``,
``headers``); ``transport`` is ``stdio`` or ``http`` and is inferred from which of ``command`` /
``url`` is written when it is left out. Values in ``env`` and ``headers`` may hold ``${VAR}``
references, kept as written here and expanded when a connection is made (so a secret is never
copied out of the environment into the settings). :func:`parse_servers` checks an array of
tables as TOML gives it and returns typed :class:`McpServer` records, or raises
:class:`ServerEntryError` naming the entry and the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any, Literal

from lev_nb.blueprint.errors import did_you_mean
from lev_nb.records import record

__all__ = ["McpServer", "ServerEntryError", "parse_servers", "SERVER_KEYS", "TRANSPORTS", "entry_line"]

TRANSPORTS: tuple[str, ...] = ("stdio", "http")
SERVER_KEYS: tuple[str, ...] = ("name", "transport", "command", "args", "env", "url", "headers")
_EMPTY: Mapping[str, str] = MappingProxyType({})


@record
class McpServer:
    """One ``[[mcp_servers]]`` entry. ``transport`` is always filled in (inferred when not written)."""

    name: str
    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def to_table(self) -> dict[str, Any]:
        """The entry as ``config.toml`` writes it (keys left at their defaults are omitted)."""
        out: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.command is not None:
            out["command"] = self.command
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = dict(self.env)
        if self.url is not None:
            out["url"] = self.url
        if self.headers:
            out["headers"] = dict(self.headers)
        return out

    def describe(self) -> str:
        """One line: the command line of a stdio server, or the URL of an HTTP one."""
        if self.transport == "http":
            return str(self.url)
        return " ".join([str(self.command), *self.args])


class ServerEntryError(ValueError):
    """An entry the format refuses: ``index`` (0-based) and ``key`` say which entry and key."""

    def __init__(self, message: str, index: int | None = None, key: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.index = index
        self.key = key
        self.hint = hint


def _strings(value: Any, what: str, index: int, key: str) -> None:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ServerEntryError(f"{what} must be an array of strings", index, key)


def _string_table(value: Any, index: int, key: str) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise ServerEntryError(f"'{key}' must be a table of strings, e.g. {key} = {{ NAME = \"value\" }}", index, key)
    for name, item in value.items():
        if not isinstance(item, str):
            raise ServerEntryError(f"'{key}.{name}' must be a string", index, key)
    return MappingProxyType(dict(value))


def _entry(raw: Any, index: int) -> McpServer:
    if not isinstance(raw, Mapping):
        raise ServerEntryError("each [[mcp_servers]] entry must be a table", index)
    for key in raw:
        if key not in SERVER_KEYS:
            raise ServerEntryError(f"unknown key '{key}'", index, str(key),
                                   hint=did_you_mean(str(key), SERVER_KEYS) or f"valid keys: {', '.join(SERVER_KEYS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ServerEntryError("every server needs a name = \"...\"", index, "name")
    for key in ("command", "url", "transport"):
        if key in raw and not isinstance(raw[key], str):
            raise ServerEntryError(f"'{key}' must be a string", index, key)
    command, url = raw.get("command"), raw.get("url")
    transport = raw.get("transport")
    if transport is not None and transport not in TRANSPORTS:
        raise ServerEntryError(f"transport '{transport}' is not one of {', '.join(TRANSPORTS)}", index, "transport",
                               hint=did_you_mean(transport, TRANSPORTS))
    if command and url:
        raise ServerEntryError(f"server '{name}' sets both command and url; a server is one or the other", index, "url")
    if transport is None:
        transport = "http" if url else "stdio"
    if transport == "stdio" and not command:
        raise ServerEntryError(f"stdio server '{name}' needs a command = \"...\"", index, "command")
    if transport == "http" and not url:
        raise ServerEntryError(f"HTTP server '{name}' needs a url = \"https://...\"", index, "url")
    if url is not None and not re.match(r"^https?://", url):
        raise ServerEntryError(f"url '{url}' must start with http:// or https://", index, "url")
    args = raw.get("args", ())
    _strings(args, "'args'", index, "args")
    env = _string_table(raw.get("env", {}), index, "env")
    headers = _string_table(raw.get("headers", {}), index, "headers")
    if transport == "http" and (args or env):
        raise ServerEntryError(f"HTTP server '{name}' takes no args or env (those are for a stdio command)", index,
                               "args" if args else "env")
    if transport == "stdio" and headers:
        raise ServerEntryError(f"stdio server '{name}' takes no headers (those are for an HTTP url)", index, "headers")
    return McpServer(name=name.strip(), transport="http" if transport == "http" else "stdio", command=command, args=tuple(args), env=env,
                     url=url, headers=headers)


def parse_servers(raw: Any) -> tuple[McpServer, ...]:
    """The checked entries of ``[[mcp_servers]]`` (an array of tables), in order; names are unique."""
    if isinstance(raw, Mapping):
        raise ServerEntryError("mcp_servers is an array of tables: write each server under its own [[mcp_servers]]")
    if not isinstance(raw, (list, tuple)):
        raise ServerEntryError("mcp_servers must be an array of tables ([[mcp_servers]] entries)")
    servers: list[McpServer] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        server = item if isinstance(item, McpServer) else _entry(item, index)
        if server.name in seen:
            raise ServerEntryError(f"two servers are named '{server.name}'; names must be unique", index, "name")
        seen.add(server.name)
        servers.append(server)
    return tuple(servers)


_HEADER = re.compile(r"^\s*\[\[\s*mcp_servers\s*\]\]")


def entry_line(text: str, index: int | None, key: str | None) -> int | None:
    """The 1-based line of entry ``index``'s ``key`` in a config file (its header when the key is
    not written there), or None when the entry is not written as a ``[[mcp_servers]]`` header."""
    if index is None:
        return None
    lines = text.splitlines()
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if index >= len(headers):
        return None
    start = headers[index]
    if key is not None:
        for i in range(start + 1, len(lines)):
            if lines[i].lstrip().startswith("["):
                break
            if re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", lines[i]):
                return i + 1
    return start + 1
