"""Which ``@requires`` capabilities of a Rhai tool script this machine can give it.

``network``, ``shell`` and ``filesystem`` are there on every platform lev_nb runs on. ``search``
(lev_nb's addition to the upstream's list) is a web search engine: there is one when the search
provider's key is in the environment and ``[security] allow_env_vars`` lets scripts read it, since
its name marks it as a credential (upstream ``tools.md`` "Web access"). A tool that needs a missing
capability is not offered (the run says so when a stage lists it), and ``lev tools`` and
``lev validate`` give the same reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SEARCH_KEY", "capability_missing"]

# The search provider the shipped web_search tool calls (Brave Search), and its key variable.
SEARCH_KEY = "BRAVE_API_KEY"


def _search_missing(settings: Any, environ: Mapping[str, str]) -> str | None:
    allowed = {name.upper() for name in settings.security.allow_env_vars}
    listed = SEARCH_KEY in allowed
    if environ.get(SEARCH_KEY):
        if listed:
            return None
        return (f"no search engine: {SEARCH_KEY} is set, but scripts may not read a credential unless "
                f"config.toml lists it: add allow_env_vars = [\"{SEARCH_KEY}\"] under [security]")
    return (f"no search engine: set {SEARCH_KEY} (a Brave Search API key) in the environment lev runs in"
            + ("" if listed else f" and add allow_env_vars = [\"{SEARCH_KEY}\"] under [security] in config.toml"))


def capability_missing(requires: Iterable[str], settings: Any, environ: Mapping[str, str] | None = None) -> str | None:
    """Why a tool needing ``requires`` cannot be offered on this machine under ``settings``, or
    None when every capability is there."""
    env = os.environ if environ is None else environ
    for capability in requires:
        if capability == "search":
            why = _search_missing(settings, env)
            if why is not None:
                return why
    return None
