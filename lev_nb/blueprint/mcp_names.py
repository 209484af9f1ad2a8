"""How an MCP tool is named to the model (the one home of the rule: lints, settings and the MCP
client read it): ``<server>__<tool>``, both parts sanitized.

Model providers accept only ``[A-Za-z0-9_-]`` in a tool name, so any other character (a dot
included) becomes ``_``; two servers whose names sanitize to the same prefix are told apart by a
``_2``, ``_3`` suffix on the later one, in configuration order (as the upstream does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["SEPARATOR", "sanitize", "server_prefixes", "qualified", "split_qualified"]

SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(name: str) -> str:
    """``name`` with every character a provider refuses in a tool name replaced by ``_``."""
    return _UNSAFE.sub("_", name) or "_"


def server_prefixes(names: Iterable[str]) -> dict[str, str]:
    """Configured server name -> the prefix its tools are advertised under (unique, in order)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = sanitize(name)
        prefix, n = base, 1
        while prefix in taken:
            n += 1
            prefix = f"{base}_{n}"
        taken.add(prefix)
        out[name] = prefix
    return out


def qualified(prefix: str, tool: str) -> str:
    """The advertised name of ``tool`` on the server whose prefix is ``prefix``."""
    return f"{prefix}{SEPARATOR}{sanitize(tool)}"


def split_qualified(name: str) -> tuple[str, str] | None:
    """``"github__create_issue"`` -> ``("github", "create_issue")``; None for a name without ``__``."""
    prefix, sep, tool = name.partition(SEPARATOR)
    if not sep or not prefix or not tool:
        return None
    return prefix, tool
