"""Agents by name, and packages of agents (issue 25; upstream ``packaging.md``, ``cli.md`` "Blueprints
and packaging").

- :mod:`.find`: the one search path of agents (a path first, then ``$LEV_HOME/agents``, the
  configuration's ``agent_paths``, the agents bundled with lev_nb) and :func:`load`, which is
  ``lev_nb.load``: a path, TOML text, or an agent's name.
- :mod:`.bundles`: ``.leviath-bundle`` archives (the upstream's format: a gzip tarball of the
  agent folder, credential-shaped files left out), packed and installed safely.
- :mod:`.inventory`: what an agent asks for that a person should see before running it.
- :mod:`.templates`: the starting points of ``lev create``.

It sits above :mod:`lev_nb.settings` (it reads ``agent_paths`` and ``$LEV_HOME``) and below
everything that takes an agent by name (scripting's ``validate``, the engine, the CLI).
"""

from __future__ import annotations

from .find import AgentEntry, agent_search_dirs, find_agent, list_agents, load, load_argument, resolve_source

__all__ = ["AgentEntry", "agent_search_dirs", "find_agent", "list_agents", "load", "load_argument", "resolve_source"]
