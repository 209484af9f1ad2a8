"""A blueprint drawn as a Mermaid flowchart.

Built with mermaid-py's flowchart classes (nodes and links only: its network renderer is never
used), plus the class lines that mark the entry, output, fan-out and terminal stages. The text is
deterministic: same blueprint, same bytes, so it can be snapshot-tested and diffed.

Legend: a solid arrow is a normal edge (labelled with its hint when it has one), a dotted arrow
is a condition edge labelled with its condition, a thick arrow is fan-out work, and every stage
where the run can end points at the ``done`` node.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mermaid.flowchart import FlowChart, Link, Node

MAX_LABEL = 60
START_ID = "lev_start"
DONE_ID = "lev_done"
CLASS_DEFS = (
    "classDef entry stroke-width:3px",
    "classDef output fill:#e6f4ea,stroke:#2e7d32",
    "classDef fanout fill:#fff4e5,stroke:#ef6c00",
    "classDef terminal stroke-dasharray:4 2",
    "classDef current fill:#fff59d,stroke:#f9a825,stroke-width:3px",
)


def escape_label(text: str) -> str:
    """Make ``text`` safe inside a quoted Mermaid label (quotes, newlines, overlong text)."""
    flat = " ".join(text.split())
    if len(flat) > MAX_LABEL:
        flat = flat[: MAX_LABEL - 1].rstrip() + "…"
    return flat.replace('"', "#quot;")


class _Ids:
    """Stable, collision-free Mermaid ids for stage names (``end`` and friends included)."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}
        self._used: set[str] = {START_ID, DONE_ID}

    def __call__(self, name: str, prefix: str = "s_") -> str:
        key = prefix + name
        if key not in self._ids:
            base = prefix + (re.sub(r"[^A-Za-z0-9_]", "_", name) or "_")
            candidate, n = base, 2
            while candidate in self._used:
                candidate, n = f"{base}_{n}", n + 1
            self._used.add(candidate)
            self._ids[key] = candidate
        return self._ids[key]


def _edge_label(edge: Any) -> str:
    if edge.is_normal:
        parts = [edge.hint] if edge.hint else []
    else:
        parts = [edge.condition]
        if edge.condition == "stuck":
            thresholds = [
                (edge.stuck_after_iterations, "turns"),
                (edge.stuck_after_same_file_edits, "edits"),
                (edge.stuck_after_tool_calls, "calls"),
                (edge.stuck_after_minutes, "min"),
            ]
            shown = [f"{v} {unit}" for v, unit in thresholds if v]
            if shown:
                parts = [f"stuck: {', '.join(shown)}"]
    if edge.gate is not None:
        parts.append("gated")
    if edge.transform != "direct":
        parts.append(edge.transform)
    return " · ".join(parts)


def _stage_node(node_id: str, name: str, stage: Any) -> Node:
    label = name if stage.mode in ("autonomous", "interactive") else f"{name} · {stage.mode}"
    shape = "normal"
    if stage.mode == "output":
        shape = "stadium-shape"
    elif stage.mode == "fan_out":
        shape = "hexagon"
    elif stage.mode == "interactive_points":
        shape = "round-edge"
    return Node(node_id, escape_label(label), shape=shape)


def blueprint_mermaid(bp: Any, direction: str = "LR", current: str | None = None) -> str:
    """The Mermaid flowchart text for ``bp``; ``current`` highlights one stage (a live run)."""
    ids = _Ids()
    nodes: list[Node] = [Node(START_ID, "start", shape="circle")]
    by_name: dict[str, Node] = {}
    for name, stage in bp.stages.items():
        node = _stage_node(ids(name), name, stage)
        by_name[name] = node
        nodes.append(node)
    external: dict[str, Node] = {}
    links: list[Link] = []
    entry = bp.entry_stage
    if entry in by_name:
        links.append(Link(nodes[0], by_name[entry]))
    done = Node(DONE_ID, "done", shape="double-circle")
    needs_done = False
    for name, stage in bp.stages.items():
        origin = by_name[name]
        if stage.mode == "fan_out":
            worker = _worker_node(stage, by_name, external, ids)
            if worker is not None:
                links.append(Link(origin, worker, shape="thick", message="fan out"))
                merge = by_name.get(stage.merge_stage or "")
                if merge is not None:
                    links.append(Link(worker, merge, shape="thick", message="results"))
        if stage.transitions is None:
            following = bp.next_stage(name)
            if following is not None and following in by_name:
                links.append(Link(origin, by_name[following]))
        for edge in stage.edges:
            target = by_name.get(edge.target)
            if target is None:
                target = external.setdefault(
                    "missing:" + edge.target,
                    Node(ids(edge.target, "missing_"), escape_label(f"{edge.target} (missing)")),
                )
            label = _edge_label(edge)
            shape = "normal" if edge.is_normal else "dotted"
            links.append(Link(origin, target, shape=shape, message=escape_label(label) if label else ""))
        if _ends_run(bp, name):
            needs_done = True
            links.append(Link(origin, done))
    nodes.extend(external.values())
    if needs_done:
        nodes.append(done)
    # The title goes into YAML front matter; a JSON string is valid YAML whatever the name holds.
    chart = FlowChart(json.dumps(bp.name), nodes, links, orientation=direction)
    lines = [chart.script.rstrip("\n")]
    lines.extend("\t" + line for line in CLASS_DEFS)
    lines.extend("\t" + line for line in _class_lines(bp, by_name, entry, current))
    return "\n".join(lines) + "\n"


def _ends_run(bp: Any, name: str) -> bool:
    """Whether the run can end at ``name``: terminal, and not a fan-out stage that moves on to
    its merge stage, nor a worker stage (a worker's end is its own run's end, not this one's)."""
    stage = bp.stages[name]
    if stage.mode == "fan_out" and stage.merge_stage:
        return False
    if any(s.mode == "fan_out" and s.worker_stage == name for s in bp.stages.values()):
        return False
    return bool(bp.is_terminal(name))


def _worker_node(
    stage: Any, by_name: dict[str, Node], external: dict[str, Node], ids: _Ids
) -> Node | None:
    target = stage.worker_target
    if target is None:
        return None
    key, value = target
    if key == "worker_stage" and value in by_name:
        return by_name[value]
    label = f"agent: {value}" if key == "worker_agent" else f"agent matching: {value}"
    return external.setdefault(
        f"{key}:{value}", Node(ids(value, "agent_"), escape_label(label), shape="subroutine-shape")
    )


def _class_lines(
    bp: Any, by_name: dict[str, Node], entry: str, current: str | None
) -> list[str]:
    groups: dict[str, list[str]] = {"entry": [], "output": [], "fanout": [], "terminal": [], "current": []}
    for name, stage in bp.stages.items():
        node_id = by_name[name].id_
        if name == entry:
            groups["entry"].append(node_id)
        if stage.mode == "output" or stage.require_output:
            groups["output"].append(node_id)
        if stage.mode == "fan_out":
            groups["fanout"].append(node_id)
        if _ends_run(bp, name):
            groups["terminal"].append(node_id)
        if name == current:
            groups["current"].append(node_id)
    return [f"class {','.join(members)} {group}" for group, members in groups.items() if members]
