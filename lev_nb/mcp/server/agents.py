"""Which agents ``lev mcp serve`` offers, and each one as an MCP tool: its name, description and
input schema (the task plus the blueprint's declared caller inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lev_nb.blueprint.errors import BlueprintError, did_you_mean
from lev_nb.blueprint.mcp_names import sanitize
from lev_nb.records import record

__all__ = ["ServeError", "ServedAgent", "served_agents"]


class ServeError(Exception):
    """``lev mcp serve`` cannot start as asked (an agent that does not load, a port in use)."""


@record
class ServedAgent:
    """One agent offered as a tool: ``name`` is the tool's name, ``inputs`` its caller inputs
    (``task`` excluded) with whether each is required."""

    name: str
    blueprint: Any
    description: str
    inputs: tuple[tuple[str, bool], ...] = ()

    def input_schema(self) -> dict[str, Any]:
        """The tool's JSON Schema: ``task`` and each declared input, as strings."""
        props: dict[str, Any] = {"task": {"type": "string", "description": "What the agent should do."}}
        required = ["task"]
        for key, needed in self.inputs:
            props[key] = {"type": "string", "description": f"The agent's '{key}' input."}
            if needed:
                required.append(key)
        return {"type": "object", "properties": props, "required": required}


def _load(spec: str) -> Any:
    from lev_nb.blueprint.bundled import bundled_agent, bundled_agent_names
    from lev_nb.blueprint.loader import load

    path = Path(spec)
    if not path.exists():
        bundled = bundled_agent(spec)
        if bundled is None:
            hint = did_you_mean(spec, bundled_agent_names())
            raise ServeError(f"'{spec}' is neither an agent folder, an agent.leviath, nor a bundled agent"
                             + (f" ({hint})" if hint else f" (bundled: {', '.join(bundled_agent_names())})"))
        path = bundled
    try:
        return load(path)
    except BlueprintError as exc:
        raise ServeError(str(exc)) from None


def _description(bp: Any) -> str:
    said = (bp.agent.description or "").strip()
    stages = " -> ".join(bp.stage_names)
    return (f"{said} " if said else "") + (
        f"Runs the lev_nb agent '{bp.name}' (stages: {stages}) on the task and returns its final output.")


def served_agents(specs: list[str]) -> list[ServedAgent]:
    """The agents named by ``specs`` (folders, agent.leviath files or bundled names; none: every
    bundled agent), each with a unique tool name. Raises :class:`ServeError`."""
    from lev_nb.blueprint.bundled import bundled_agent_names

    names = specs or bundled_agent_names()
    if not names:
        raise ServeError("no agents to serve: name agent folders, or install lev_nb with its bundled agents")
    out: list[ServedAgent] = []
    taken: set[str] = set()
    for spec in names:
        bp = _load(spec)
        base = sanitize(bp.name)
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        inputs = tuple((i.key, i.required) for i in bp.inputs if i.key != "task")
        out.append(ServedAgent(name=name, blueprint=bp, description=_description(bp), inputs=inputs))
    return out
