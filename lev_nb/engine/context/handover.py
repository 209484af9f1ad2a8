"""What a parent hands its child at spawn: ``[[transforms]]`` region mappings (upstream
``agents.md`` "Handing context to a sub-agent", ``sub-agents.md``).

When a run of blueprint A starts a child of blueprint B (``spawn_agent`` or a fan-out worker of
another agent), the first ``[[transforms]]`` entry with ``from_blueprint = A`` and
``to_blueprint = B`` - looked up in A's blueprint, then in B's - says which of A's regions fill
which of B's. A child of the same blueprint gets nothing this way. Each mapping copies the
parent's region as it stands at spawn (its entries joined by newlines; an empty one hands over
nothing): ``direct`` as it is, ``extract`` keeping only the named ``fields`` of a JSON object
(other text is handed over whole, with a warning), ``summarize`` as it is and then summarised by
the child's ``[compaction]`` model before its first turn (on failure the copy stays, with a
warning). The child receives them after its own seeds.
"""

from __future__ import annotations

import json
from typing import Any

from lev_nb.records import record

__all__ = ["Handover", "handovers", "mappings_for", "problems", "receive"]


@record
class Handover:
    """One region's content on its way from parent to child."""

    from_region: str
    to_region: str
    content: str
    transform: str = "direct"
    note: str | None = None  # why the content is not what the mapping asked for (told by the child)


def mappings_for(parent: Any, child: Any) -> tuple[Any, ...]:
    """The region mappings from ``parent``'s plan to ``child``'s: the first ``[[transforms]]``
    entry naming both, in the parent's blueprint and then the child's; () when none does."""
    if parent.agent_name == child.agent_name:
        return ()
    for plan in (parent, child):
        for spec in plan.transforms:
            if spec.from_blueprint == parent.agent_name and spec.to_blueprint == child.agent_name and spec.mappings:
                return tuple(spec.mappings)
    return ()


def handovers(ctx: Any, mappings: tuple[Any, ...]) -> list[Handover]:
    """What each mapping hands over from the parent's context ``ctx`` now."""
    out: list[Handover] = []
    for mapping in mappings:
        if not ctx.has_region(mapping.from_region):
            out.append(Handover(mapping.from_region, mapping.to_region, "", mapping.transform,
                                note=f"the parent has no region '{mapping.from_region}'"))
            continue
        joined = "\n".join(entry.content for entry in ctx.region(mapping.from_region).entries)
        if not joined:
            continue
        note = None
        if mapping.transform == "extract":
            joined, note = _extract(joined, mapping.fields)
        out.append(Handover(mapping.from_region, mapping.to_region, joined, mapping.transform, note))
    return out


def _extract(content: str, fields: tuple[str, ...]) -> tuple[str, str | None]:
    """The named fields of a JSON object, pretty-printed; other text whole, with why."""
    try:
        value = json.loads(content)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return content, "it is not a JSON object, so it was handed over whole"
    return json.dumps({f: value[f] for f in fields if f in value}, indent=2, ensure_ascii=False), None


def receive(ctx: Any, given: list[Handover]) -> tuple[list[str], list[str]]:
    """Write ``given`` into the child's context ``ctx``: (the regions filled, the regions to
    summarise). What could not be taken as asked, :func:`problems` says."""
    filled: list[str] = []
    summarise: list[str] = []
    for item in given:
        if not item.content or not ctx.has_region(item.to_region):
            continue
        ctx.seed(item.to_region, item.content)
        filled.append(item.to_region)
        if item.transform == "summarize":
            summarise.append(item.to_region)
    return filled, summarise


def problems(ctx: Any, given: list[Handover], parent_agent: str) -> list[str]:
    """One sentence for each mapping the child could not take as its blueprint asked."""
    out: list[str] = []
    for item in given:
        where = f"region '{item.from_region}' of '{parent_agent}' for region '{item.to_region}'"
        if item.note is not None:
            out.append(f"[[transforms]] {where}: {item.note}")
        elif item.content and not ctx.has_region(item.to_region):
            out.append(f"[[transforms]] {where}: this agent has no region '{item.to_region}', so it was not handed over")
    return out
