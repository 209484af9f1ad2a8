"""The upstream runtime's ``config.toml`` keys that lev_nb reads under another name or does not
honour (issue 25; upstream ``configuration.md`` and ``config.schema.json``).

A user brings their upstream configuration along. Like the upstream, lev_nb then warns about a key
nothing reads and goes on; it never refuses the file for it. :data:`ALIASES` maps an upstream key
to the lev_nb key that has the same meaning (the value is checked as that key's); :data:`IGNORED`
names each upstream key lev_nb cannot honour, with the reason the warning gives. A key in neither
(and not in lev_nb's own schema) is a plain unknown key: a warning with a "did you mean".
Keys are dotted; an entry that names a table covers every key under it.
"""

from __future__ import annotations

from .schema import Key

__all__ = ["ALIASES", "IGNORED", "alias_of", "ignored_reason"]

ALIASES: dict[str, str] = {
    # The upstream keeps the circuit breaker's numbers under [limits].
    "limits.provider_failures_before_open": "providers.provider_failures_before_open",
    "limits.provider_circuit_cooldown_secs": "providers.provider_circuit_cooldown_secs",
    # The upstream's top-level request timeout is lev_nb's [limits] one.
    "request_timeout_secs": "limits.request_timeout_secs",
}

_DAEMON = "lev_nb has no daemon: each run lives in the process that started it"
IGNORED: dict[str, str] = {
    "providers.claude_code_enabled": "lev_nb has no Claude Code provider",
    "providers.claude_code_binary": "lev_nb has no Claude Code provider",
    "providers.claude_code_effort": "lev_nb has no Claude Code provider",
    "providers.anthropic_cache_ttl": "lev_nb asks for the API's default cache lifetime (five minutes)",
    "limits.exact_token_counting": "lev_nb estimates tokens locally and never calls a counting endpoint",
    "limits.script_shell_timeout_secs": "a script's shell() keeps its fixed 60 s timeout",
    "limits.mcp_idle_disconnect_secs": "an MCP server stays connected until the process that started it ends",
    "limits.dead_cycles_before_relief": _DAEMON,
    "limits.finished_retention_secs": _DAEMON + "; finished runs stay in $LEV_HOME/runs until removed",
    "limits.wedge_timeout_secs": "lev_nb's watchdogs are the per-request timeout and the stall timeout",
    "security.credential_store": "keys are read from environment variables only",
}


def _lookup(table: dict[str, str], key: Key) -> str | None:
    for n in range(len(key), 0, -1):
        found = table.get(".".join(key[:n]))
        if found is not None:
            return found
    return None


def alias_of(key: Key) -> Key | None:
    """The lev_nb key an upstream key is read as, or None."""
    target = ALIASES.get(".".join(key))
    return tuple(target.split(".")) if target is not None else None


def ignored_reason(key: Key) -> str | None:
    """Why lev_nb does not honour this upstream key (or the table holding it), or None."""
    return _lookup(IGNORED, key)
