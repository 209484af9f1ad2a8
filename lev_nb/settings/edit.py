"""Changing ``config.toml`` for the user (``lev mcp add`` / ``lev mcp remove``), keeping every
comment and every other key as written (tomlkit edits the document, not a re-dump of its values).

The new text is checked with the same loader as any configuration before it replaces the file,
atomically: a change that would make the file unusable is refused and the file is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import ConfigError, unreadable
from .mcp_servers import McpServer

__all__ = ["add_mcp_server", "remove_mcp_server"]


def _read(path: Path) -> Any:
    import tomlkit

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise unreadable(path, exc) from None
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit's parse errors share no base class worth naming
        raise ConfigError(f"not valid TOML: {exc}", path=path, kind="parse") from None


def _write(path: Path, doc: Any) -> None:
    import tomlkit

    from .loader import load

    text = tomlkit.dumps(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        load(tmp, environ={})  # the result must be a configuration lev_nb can read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_mcp_server(path: Path, server: McpServer) -> None:
    """Append ``server`` as a ``[[mcp_servers]]`` entry; a name already taken is a ConfigError."""
    import tomlkit

    doc = _read(path)
    entries = doc.get("mcp_servers")
    if entries is not None and any(isinstance(e, dict) and e.get("name") == server.name for e in entries):
        raise ConfigError(f"an MCP server named '{server.name}' is already configured", path=path,
                          key_path="mcp_servers", hint=f"remove it first: lev mcp remove {server.name}")
    if entries is None:
        entries = tomlkit.aot()
        doc.append("mcp_servers", entries)
    table = tomlkit.table()
    for key, value in server.to_table().items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table.add(key, inline)
        else:
            table.add(key, value)
    table.add(tomlkit.nl())
    entries.append(table)
    _write(path, doc)


def remove_mcp_server(path: Path, name: str) -> bool:
    """Remove the entry called ``name``; False when there is none."""
    doc = _read(path)
    entries = doc.get("mcp_servers")
    if entries is None:
        return False
    index = next((i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("name") == name), None)
    if index is None:
        return False
    del entries[index]
    if len(entries) == 0:
        del doc["mcp_servers"]
    _write(path, doc)
    return True
