"""Whether this machine's settings grant what a blueprint declares
(docs/security.md#reads-outside-the-workdir, docs/security.md#safe-commands).

:func:`read_path_report` answers, entry by entry, whether the ``[read_paths]`` a blueprint
declares are live under the settings: "granted", "NOT granted" or "cannot be checked from the
pattern alone". The check is pattern-level and never touches the disk: each declared entry is
compiled against the workdir (the current folder, which is what ``lev run`` defaults to), reduced
to one sample path, and offered to the compiled grants (``[security] read_paths`` plus
``[agent_read_paths.<agent>] allow``) with :meth:`ReadPathSet.matches_lexically`.
``[security] allow_blueprint_read_paths = true`` grants every declaration wholesale. Grants that do
not compile are reported as such (lint ``read-paths-grant-invalid``), never silently dropped.

:func:`lint_env` turns the settings into the :class:`LintEnv` of ``lev validate``;
:func:`configured_lint_env` does that for the effective settings, falling back to the
"configuration unknown" environment when they cannot be read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lev_nb.blueprint.model import Blueprint
from lev_nb.blueprint.read_paths import (
    ReadPathError,
    ReadPathSet,
    compile_entry,
    grant_stanza,
    home_dir,
)
from lev_nb.records import record
from lev_nb.sandbox import Mount, MountGrant

from .errors import ConfigError
from .model import Settings

if TYPE_CHECKING:  # the lints load with `lev validate`, not with every run (issue 15, instant start)
    from lev_nb.blueprint.lints import LintEnv

__all__ = [
    "STATUS_LABELS", "ReadPathReport", "configured_lint_env", "lint_env", "mount_grant", "read_grant", "read_path_report",
]

# How each verdict reads in a report.
STATUS_LABELS: dict[bool | None, str] = {
    True: "granted",
    False: "NOT granted",
    None: "cannot be checked from the pattern alone",
}


@record
class ReadPathReport:
    """Every declared entry of one blueprint with its verdict (True, False, or None = cannot tell)."""

    agent: str
    allow_blueprint: bool
    entries: tuple[tuple[str, bool | None], ...]

    def status(self, entry: str) -> bool | None:
        """The verdict for one declared entry (None when it is not declared)."""
        return dict(self.entries).get(entry)

    @property
    def declared(self) -> int:
        """How many entries the blueprint declares."""
        return len(self.entries)

    @property
    def granted(self) -> int:
        """How many of them the settings grant."""
        return sum(1 for _, status in self.entries if status is True)

    def ungranted(self) -> list[str]:
        """The entries that will be refused, in declaration order (undecided ones are left out)."""
        return [raw for raw, status in self.entries if status is False]

    def summary(self) -> str:
        """``"3 declared, 1 granted"``."""
        return f"{self.declared} declared, {self.granted} granted"

    def grant_stanza(self) -> str:
        """The config.toml lines that would grant every refused entry ("" when none is refused)."""
        refused = self.ungranted()
        return grant_stanza(self.agent, refused) if refused else ""


def mount_grant(agent: str, settings: Settings, home: str | os.PathLike[str] | None = None) -> MountGrant:
    """Which ``[sandbox] mount`` sources outside the workdir the user lets ``agent`` show.

    ``[security] sandbox_mounts`` entries (the ``[read_paths]`` forms, relative ones taken from the
    current folder) grant a read-only mount, and a read-write one when the entry ends in ``:rw``;
    the agent's read grants (``[security] read_paths``, ``[agent_read_paths.<agent>]``) grant a
    read-only mount too, since they already let it read there. Raises :class:`ReadPathError` when an
    entry does not compile, so a run refuses to start rather than show more or less than meant.
    """
    home_path = Path(home) if home is not None else home_dir()
    read_only: list[str] = []
    read_write: list[str] = []
    # The machine-wide [sandbox] mounts are the user's own, so granted as written.
    for raw in (*settings.security.sandbox_mounts, *(_source_of(m) for m in settings.sandbox.mounts)):
        path, _, mode = raw.rpartition(":") if raw.endswith((":rw", ":ro")) else (raw, "", "ro")
        (read_write if mode == "rw" else read_only).append(path)
    entries = [*read_only, *read_write, *settings.read_path_grants(agent)]
    if not entries:  # the common case: nothing granted, and no need to ask for the current folder
        return _nothing_granted
    cwd = Path.cwd()
    readable = ReadPathSet.compile(entries, cwd, home_path)
    writable = ReadPathSet.compile(read_write, cwd, home_path)

    def granted(mount: Mount) -> bool:
        return (writable if mount.writable else readable).matches_lexically(mount.source)

    return granted


def _nothing_granted(mount: Mount) -> bool:
    """The grant when the user granted no mount source: none outside the workdir is shown."""
    return False


def _source_of(mount: str) -> str:
    """A machine ``mounts`` entry (``SRC[:DST][:ro|rw]``) as a grant of its source, mode kept."""
    from lev_nb.sandbox import split_mount

    source, _, writable = split_mount(mount)
    return f"{source}:{'rw' if writable else 'ro'}"


def read_path_report(
    agent: str,
    declared: list[str] | tuple[str, ...],
    settings: Settings,
    workdir: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> ReadPathReport:
    """Judge ``declared`` against the grants ``settings`` give ``agent``.

    ``workdir`` (default: the current folder) anchors relative entries; ``home`` (default: the
    user's home) expands ``~/``. Raises :class:`ReadPathError` when the grants themselves do not
    compile; a declared entry that does not compile is "cannot tell", not an error.
    """
    where = Path(workdir) if workdir is not None else Path.cwd()
    home_path = Path(home) if home is not None else home_dir()
    grants = ReadPathSet.compile(settings.read_path_grants(agent), where, home_path)
    allow_blueprint = settings.security.allow_blueprint_read_paths
    verdicts = tuple((raw, _entry_status(raw, grants, allow_blueprint, where, home_path)) for raw in declared)
    return ReadPathReport(agent=agent, allow_blueprint=allow_blueprint, entries=verdicts)


def _entry_status(raw: str, grants: ReadPathSet, allow_blueprint: bool, workdir: Path,
                  home: Path | None) -> bool | None:
    if allow_blueprint:
        return True
    if grants.is_empty():
        return False
    try:
        sample = compile_entry(raw, workdir, home).sample_path()
    except ReadPathError:
        return None  # the environment (no home, say) is what could not be resolved: cannot tell
    if sample is None:
        return None
    return grants.matches_lexically(sample)


def lint_env(bp: Blueprint, settings: Settings | None, workdir: str | os.PathLike[str] | None = None) -> LintEnv:
    """The lint environment of ``bp`` under ``settings``; ``None`` gives the "configuration unknown" one."""
    from lev_nb.blueprint.lints import LintEnv

    env = LintEnv.for_blueprint(bp)
    if settings is None:
        return env
    declared_safe = bp.safe_commands
    _, safe_shell = settings.safe_command_entries(
        bp.agent.name, declared_safe.tools if declared_safe else (), declared_safe.shell if declared_safe else ())
    from lev_nb.blueprint.script_tools import script_tool_names

    from .paths import lev_home

    changes: dict[str, object] = {
        # The global tools folder ($LEV_HOME/tools) offers its tools to every agent that lists them.
        "known_tools": env.known_tools | set(script_tool_names(lev_home())),
        "safe_commands_honoured": settings.safe_commands_honoured(bp.agent.name),
        "permission_ceiling": _ceiling(bp.agent.name, settings),
        "mcp_servers": mcp_server_names(settings),
        "safe_shell": safe_shell,
        "seed_commands_allowed": settings.security.allow_seed_commands,
        "unavailable_tools": _unavailable_tools(bp.base_dir, lev_home(), settings),
    }
    declared = list(bp.read_paths.allow) if bp.read_paths is not None else []
    try:
        report = read_path_report(bp.agent.name, declared, settings, workdir)
    except ReadPathError as exc:
        changes["read_paths_grant_error"] = str(exc)
    else:
        verdicts = dict(report.entries)
        changes["read_path_granted"] = lambda entry: verdicts.get(entry, False)
        changes["read_paths_allow_blueprint"] = report.allow_blueprint
    return dataclasses.replace(env, **changes)  # type: ignore[arg-type]


def _unavailable_tools(agent_dir: Any, home: Path, settings: Settings) -> dict[str, str]:
    """The script tools (the agent's own, then $LEV_HOME/tools) whose @requires this machine
    cannot meet: name -> why. A file whose metadata cannot be read is the other lints' business."""
    from lev_nb.blueprint.script_tools import ToolSpecError, tool_files, tool_spec

    from .capabilities import capability_missing

    found: dict[str, str] = {}
    seen: set[str] = set()
    folders = ([Path(agent_dir) / "tools"] if agent_dir is not None else []) + [home / "tools"]
    for path in tool_files(folders):
        try:
            spec = tool_spec(path)
        except ToolSpecError:
            continue
        if spec.name in seen:
            continue  # the first file to declare a name keeps it (an agent's own tool shadows a global one)
        seen.add(spec.name)
        why = capability_missing(spec.requires, settings)
        if why is not None:
            found[spec.name] = why
    return found


def _ceiling(agent: str, settings: Settings) -> Callable[[str], str | None]:
    """tool -> the policy the configuration holds ``agent``'s blueprint to for it: its
    ``[tool_permissions]`` entry, else the built-in default; None when the blueprint's own word
    counts (``[security] allow_blueprint_permissions``) or the tool is not a built-in one."""
    from lev_nb.blueprint.constants import POLICIES, tool_spellings
    from lev_nb.blueprint.lints_own import default_policy

    table = {k.lower(): str(v).lower() for k, v in settings.tool_ceiling(agent).items()}
    loosen = settings.security.allow_blueprint_permissions

    def ceiling(tool: str) -> str | None:
        if loosen:
            return None
        for spelling in tool_spellings(tool.lower()):
            if table.get(spelling) in POLICIES:
                return table[spelling]
        return default_policy(tool)

    return ceiling


def mcp_server_names(settings: Settings) -> dict[str, frozenset[str] | None] | None:
    """Each configured MCP server by its name and by its advertised prefix (tools not known yet).
    None on a machine with no MCP server configured: there the lint says nothing about MCP names,
    as the upstream's never does."""
    from lev_nb.blueprint.mcp_names import server_prefixes

    if not settings.mcp_servers:
        return None
    out: dict[str, frozenset[str] | None] = {}
    for name, prefix in server_prefixes(s.name for s in settings.mcp_servers).items():
        out[name] = out[prefix] = None
    return out


def configured_lint_env(bp: Blueprint) -> LintEnv:
    """:func:`lint_env` under the effective settings, or the unknown form when they cannot be read."""
    from .loader import current

    try:
        settings = current()
    except ConfigError:
        settings = None
    return lint_env(bp, settings)


def read_grant(
    agent: str,
    declared: Sequence[str],
    settings: Settings,
    workdir: str | os.PathLike[str],
    home: str | os.PathLike[str] | None = None,
) -> Callable[[Path], bool] | None:
    """Which real paths outside the workdir a run of ``agent`` may read, or None for none.

    A path must be both declared by the blueprint (``[read_paths] allow``, relative entries taken
    from ``workdir``) and granted by the user (``[agent_read_paths.<agent>]``, ``[security]
    read_paths``, relative grants taken from the current folder), unless ``[security]
    allow_blueprint_read_paths`` honours every declaration. Raises :class:`ReadPathError` when the
    grants do not compile, so a run refuses to start rather than read more or less than meant.
    """
    if not declared:
        return None
    home_path = Path(home) if home is not None else home_dir()
    wanted = ReadPathSet.compile(declared, workdir, home_path)
    if settings.security.allow_blueprint_read_paths:
        return lambda real: wanted.matches_lexically(real)
    grants = ReadPathSet.compile(settings.read_path_grants(agent), Path.cwd(), home_path)
    if grants.is_empty():
        return None
    return lambda real: wanted.matches_lexically(real) and grants.matches_lexically(real)
