"""Where an agent named by name is found, in one place.

An argument that is a path (a folder holding ``agent.leviath``, or the file itself) is that path.
Otherwise a bare name is looked up, first match wins, in:

1. ``$LEV_HOME/agents/<name>`` (what ``lev add`` installs; the upstream's ``~/.leviath/agents``),
2. each folder of the configuration's ``agent_paths``, in order (``~`` expanded; a relative entry
   is taken from the folder of ``config.toml``),
3. the agents bundled with lev_nb (package data, so an installed wheel has them).

A name never contains ``/`` or ``\\`` and is never ``.`` or ``..``, so it cannot reach other folders.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from lev_nb.blueprint.bundled import bundled_agents_dir
from lev_nb.blueprint.constants import MANIFEST_NAME
from lev_nb.blueprint.errors import BlueprintError, did_you_mean
from lev_nb.blueprint.loader import load as load_blueprint
from lev_nb.blueprint.loader import looks_like_text
from lev_nb.blueprint.model import Blueprint
from lev_nb.records import record
from lev_nb.settings.paths import config_path, lev_home

__all__ = ["AgentEntry", "Source", "agent_search_dirs", "find_agent", "is_agent_name", "list_agents", "load",
           "load_argument", "resolve_source"]

Source = Literal["installed", "configured", "bundled"]


@record
class AgentEntry:
    """One agent the search path knows: its folder name, where it was found, its manifest."""

    name: str
    source: Source
    manifest: Path


def is_agent_name(text: str) -> bool:
    """Whether ``text`` can be an agent's name: no separator, not ``.``/``..``, no TOML."""
    return bool(text) and text not in (".", "..") and not any(c in text for c in "/\\\x00\n=[")


def agent_search_dirs(home: str | os.PathLike[str] | None = None) -> list[tuple[Source, Path]]:
    """The folders searched for agents by name, in order, with what each is."""
    dirs: list[tuple[Source, Path]] = [("installed", lev_home(home) / "agents")]
    dirs += [("configured", folder) for folder in _configured_dirs()]
    dirs.append(("bundled", bundled_agents_dir()))
    return dirs


def _configured_dirs() -> list[Path]:
    from lev_nb.settings import ConfigError, current

    try:
        entries = current().agent_paths
    except ConfigError:
        return []  # an unreadable configuration is reported where it is used; names still resolve
    base = config_path().parent
    return [base / Path(entry).expanduser() for entry in entries]


def find_agent(name: str, home: str | os.PathLike[str] | None = None) -> AgentEntry | None:
    """The first agent called ``name`` on the search path, or None."""
    if not is_agent_name(name):
        return None
    for source, folder in agent_search_dirs(home):
        manifest = folder / name / MANIFEST_NAME
        if manifest.is_file():
            return AgentEntry(name, source, manifest)
    return None


def list_agents(home: str | os.PathLike[str] | None = None) -> Iterator[AgentEntry]:
    """Every agent on the search path, in search order, each folder's agents sorted by name. A name
    found twice is listed twice (the first one is what a run by name gets)."""
    for source, folder in agent_search_dirs(home):
        try:
            children = sorted(folder.iterdir())
        except OSError:
            continue
        for child in children:
            manifest = child / MANIFEST_NAME
            if manifest.is_file():
                yield AgentEntry(child.name, source, manifest)


def resolve_source(source: str | os.PathLike[str] | Blueprint) -> str | os.PathLike[str] | Blueprint:
    """``source`` as :func:`lev_nb.blueprint.load` takes it: a Blueprint, TOML text and existing
    paths pass through; an agent's name becomes its manifest; anything else is an error that says
    where agents were looked for and which names are close (BlueprintError)."""
    if isinstance(source, Blueprint):
        return source
    if isinstance(source, str) and looks_like_text(source):
        return source
    path = Path(source)
    if path.exists():
        return source
    text = str(source)
    if is_agent_name(text):
        entry = find_agent(text)
        if entry is not None:
            return entry.manifest
        raise _unknown_agent(text)
    return source  # a path that does not exist: the loader says so, naming it


def _unknown_agent(name: str) -> BlueprintError:
    names = sorted({entry.name for entry in list_agents()})
    guess = did_you_mean(name, names)
    hint = f"{guess} " if guess else ""
    return BlueprintError(
        f"No agent '{name}': it is not a folder here, nor an agent installed in $LEV_HOME/agents, in the "
        "configuration's agent_paths or bundled with lev_nb", kind="read", path=Path(name),
        hint=f"{hint}`lev list` shows the agents there are; pass a folder holding an agent.leviath to use another",
    )


def load_argument(text: str) -> Blueprint:
    """The blueprint a command-line argument names: an existing path, else an agent's name (a bare
    word), else the path the loader says is missing. Never read as TOML text."""
    if not Path(text).exists() and is_agent_name(text):
        return load_blueprint(resolve_source(text))
    return load_blueprint(Path(text))


def load(source: str | os.PathLike[str] | Blueprint) -> Blueprint:
    """Load a blueprint from an agent folder, its agent.leviath, TOML text, or an agent's name
    (``lev_nb.load("triage")``: see the module docstring for where names are looked up).
    Raises :class:`BlueprintError` on any problem."""
    return load_blueprint(resolve_source(source))
