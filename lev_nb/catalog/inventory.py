"""What an agent asks for that a person should see before running it (``lev add`` prints it;
upstream ``packaging.md``: pre-approved tools, script host access, shipped script tools,
``[read_paths]`` with their grant status, a sandbox turned off, commands run at startup), plus
lev_nb's own: the sandbox mounts it wants and whether this machine grants them."""

from __future__ import annotations

from pathlib import Path

from lev_nb.blueprint.model import Blueprint
from lev_nb.settings import ConfigError, Settings, current

__all__ = ["capabilities"]


def capabilities(bp: Blueprint, settings: Settings | None = None) -> list[str]:
    """One sentence per unusual thing ``bp`` asks for, in a fixed order (empty: nothing unusual)."""
    if settings is None:
        try:
            settings = current()
        except ConfigError:
            settings = None
    found: list[str] = []
    folder = bp.base_dir
    scripts = sorted(p.name for p in (Path(folder) / "tools").glob("*.rhai")) if folder is not None else []
    if scripts:
        found.append(f"ships {len(scripts)} script tool(s) that run code: {', '.join(scripts)}")
    allowed = sorted({tool for tool, policy in bp.tool_permissions.items() if policy == "allow"}
                     | {tool for stage in bp.stages.values() for tool, policy in stage.tool_permissions.items()
                        if policy == "allow"})
    if allowed:
        found.append(f"pre-approves these tools (no question at run time): {', '.join(allowed)}")
    host = bp.raw.get("tool_script_permissions")
    if isinstance(host, dict):
        wanted = sorted(k for k, v in host.items() if v == "allow")
        if wanted:
            found.append(f"asks its scripts for host access: {', '.join(wanted)}")
    if bp.sandbox is not None and bp.sandbox.kind == "none" and "kind" in (bp.raw.get("sandbox") or {}):
        found.append("asks to run its commands on the host (sandbox kind = \"none\")")
    mounts = sorted({m for sb in [bp.sandbox, *(s.sandbox for s in bp.stages.values())] if sb is not None
                     for m in sb.mount})
    if mounts:
        found.append(f"asks its sandbox to show host paths: {', '.join(mounts)} (each needs "
                     "[security] sandbox_mounts in your configuration unless it is inside the workdir)")
    if bp.read_paths is not None and bp.read_paths.allow:
        found.append(_read_paths(bp, settings))
    for command in _seed_commands(bp):
        found.append(f"runs this command when it starts, before any prompt: `{command}`")
    return found


def _read_paths(bp: Blueprint, settings: Settings | None) -> str:
    from lev_nb.blueprint.read_paths import ReadPathError
    from lev_nb.settings.grants import read_path_report

    assert bp.read_paths is not None
    listed = ", ".join(bp.read_paths.allow)
    if settings is None:
        return f"asks to read outside its workdir: {listed}; your configuration could not be read"
    try:
        report = read_path_report(bp.agent.name, list(bp.read_paths.allow), settings)
    except ReadPathError as exc:
        return f"asks to read outside its workdir: {listed}; your grants do not compile ({exc})"
    if report.ungranted():
        return (f"asks to read outside its workdir: {listed}; {report.summary()} (grant the rest with "
                f"[agent_read_paths.{bp.agent.name}] in your configuration)")
    return f"asks to read outside its workdir: {listed}; {report.summary()}, all granted by your configuration"


def _seed_commands(bp: Blueprint) -> list[str]:
    regions = list(bp.context.regions.values())
    regions += [r for stage in bp.stages.values() if stage.context is not None for r in stage.context.regions.values()]
    return [r.seed.value or "" for r in regions if r.seed is not None and r.seed.kind == "command"]
