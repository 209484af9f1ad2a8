"""A blueprint drawn as a Mermaid flowchart, and the path a run took through it.

Built with mermaid-py's flowchart classes (nodes and links only: its network renderer is never
used), plus the class lines that mark the entry, output, fan-out and terminal stages. The text is
deterministic: same blueprint, same bytes, so it can be snapshot-tested and diffed.

Legend: a solid arrow is a normal edge, a dotted arrow is a condition edge labelled with its
condition, a thick arrow is fan-out work, and every stage where the run can end points at the
``done`` node. Edge labels stay short so they never cover each other: a hint longer than
``MAX_EDGE_LABEL`` is cut at a word and numbered, and the full hints are listed in a note under
the graph. Class colours set both the fill and the text colour (contrast at least 4.5:1), and the
front matter pins Mermaid's theme to colours that read on a light and a dark page alike, so the
picture JupyterLab draws (and saves) does not depend on the theme it was drawn in. Graphs with more
than ``MAX_LR_STAGES`` stages are drawn top-down by default, which keeps them narrow enough to stay
readable in a narrow window; every stage a loop leads back to has an invisible link forward to
where the loop starts, so the layout reads from start to end.

:func:`run_mermaid` draws the same graph with a run's path on it: visited stages, the edges taken,
and the stage it is in (or ended in, coloured by how it ended). :mod:`lev_nb.blueprint.picture`
draws the same nodes and links as a static SVG/PNG with Graphviz.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from typing import Any

from mermaid.flowchart import FlowChart, Link, Node

MAX_LABEL = 60
MAX_EDGE_LABEL = 24
# A hint at most this much longer than MAX_EDGE_LABEL stays whole: cutting it would save little.
EDGE_LABEL_SLACK = 6
MAX_LR_STAGES = 3
START_ID = "lev_start"
DONE_ID = "lev_done"
LEGEND_ID = "lev_hints"
# Colours that read on a light and on a dark page alike, pinned in the diagram itself: JupyterLab
# draws Mermaid with its light or dark theme as the page is when the diagram is drawn, and keeps
# that picture through a theme switch (and saves it into the notebook, so a copy drawn in another
# theme would mark the notebook modified on opening). Every node and edge label is filled with a
# light colour and written in a dark one; lines, arrowheads and the title, which lie on the page
# itself, are a middle grey: 4.2:1 on white, 4.5:1 on JupyterLab Dark's #111111 (no grey reaches
# 4.5:1 on both, so the title is drawn bold). The Graphviz picture (picture.py) uses the same.
NODE_FILL, NODE_STROKE, NODE_TEXT = "#eef2f7", "#5b6675", "#1b1f24"
LINE_COLOUR = "#7b7b7b"
LABEL_FILL, LABEL_TEXT = "#f4f4f4", "#212121"
THEME_VARIABLES = {
    "primaryColor": NODE_FILL, "primaryBorderColor": NODE_STROKE,
    "primaryTextColor": NODE_TEXT, "nodeTextColor": NODE_TEXT, "textColor": LABEL_TEXT, "lineColor": LINE_COLOUR,
    "edgeLabelBackground": LABEL_FILL,
}
# Layout in the front matter: ELK places edge labels so they never overlap (JupyterLab loads it
# when it sees ``defaultRenderer: elk``); linear segments keep long chains straight and narrow.
FRONT_MATTER_CONFIG = (
    "config:", "  theme: base", "  themeVariables:",
    *(f'    {name}: "{value}"' for name, value in THEME_VARIABLES.items()),
    f'  themeCSS: ".flowchartTitleText {{ fill: {LINE_COLOUR}; font-weight: bold; }} .edgeLabel, .edgeLabel p, '
    f'.labelBkg {{ background-color: {LABEL_FILL}; color: {LABEL_TEXT}; }}"',
    "  flowchart:", "    defaultRenderer: elk", "  elk:", "    nodePlacementStrategy: LINEAR_SEGMENTS",
)

# Every class sets its fill and its text colour together (or neither), so the text keeps its
# contrast whatever the theme gives unstyled nodes. Later classes win where a node has several.
CLASS_STYLES: dict[str, str] = {
    "entry": "stroke-width:3px",
    "output": "fill:#dcf1e1,stroke:#2e7d32,color:#14371b",
    "fanout": "fill:#ffe8cc,stroke:#c25e00,color:#4a2400",
    "terminal": "stroke-dasharray:4 2",
    "hints": "fill:#f4f4f4,stroke:#9e9e9e,color:#212121,text-align:left",
    "visited": "fill:#dbe7ff,stroke:#3b5bdb,color:#14233f",
    "current": "fill:#fff3a3,stroke:#b08800,stroke-width:3px,color:#332b00",
    "failed": "fill:#ffd7d5,stroke:#c62828,stroke-width:3px,color:#4a0f0c",
    "finished": "fill:#c9efd3,stroke:#2e7d32,stroke-width:3px,color:#10311a",
}
# The edges a run took: a thick orange line reads on white (3.6:1) and on near-black (5.3:1).
PATH_LINK_STYLE = "stroke:#e8590c,stroke-width:3px"


def escape_label(text: str, limit: int = MAX_LABEL) -> str:
    """Make ``text`` safe inside a quoted Mermaid label (quotes, newlines, overlong text)."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return flat.replace('"', "#quot;")


def short_hint(hint: str, limit: int | None = None) -> str:
    """``hint`` cut to at most ``limit`` (default ``MAX_EDGE_LABEL``) characters at a word
    boundary, with an ellipsis; a hint only ``EDGE_LABEL_SLACK`` characters over stays whole."""
    limit = MAX_EDGE_LABEL if limit is None else limit
    flat = " ".join(hint.split())
    if len(flat) <= limit + EDGE_LABEL_SLACK:
        return flat
    cut = flat[: limit - 1]
    if " " in cut and not flat[limit - 1].isspace():
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.-") + "…"


def default_direction(bp: Any) -> str:
    """``LR`` for a small blueprint, ``TB`` for a larger one (narrower, so its text stays readable)."""
    return "LR" if len(bp.stages) <= MAX_LR_STAGES else "TB"


class _Ids:
    """Stable, collision-free Mermaid ids for stage names (``end`` and friends included)."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}
        self._used: set[str] = {START_ID, DONE_ID, LEGEND_ID}

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


class _Drawing:
    """The nodes and links of one blueprint's graph, with what a run path needs to find them."""

    def __init__(self, bp: Any) -> None:
        self.bp = bp
        self.ids = _Ids()
        self.nodes: list[Node] = [Node(START_ID, "start", shape="circle")]
        self.links: list[Link] = []
        self.by_name: dict[str, Node] = {}
        self.external: dict[str, Node] = {}
        self.hints: list[tuple[int, str, str, str]] = []  # (number, from, to, full hint)
        # (from, to) -> indexes into links, for drawing the path a run took
        self.link_index: dict[tuple[str, str], list[int]] = {}
        self.done = Node(DONE_ID, "done", shape="double-circle")
        self._draw()

    def _link(self, origin: str, target: str, link: Link) -> None:
        self.link_index.setdefault((origin, target), []).append(len(self.links))
        self.links.append(link)

    def _draw(self) -> None:
        bp = self.bp
        for name, stage in bp.stages.items():
            node = _stage_node(self.ids(name), name, stage)
            self.by_name[name] = node
            self.nodes.append(node)
        entry = bp.entry_stage
        if entry in self.by_name:
            self._link(START_ID, entry, Link(self.nodes[0], self.by_name[entry]))
        needs_done = False
        for name, stage in bp.stages.items():
            origin = self.by_name[name]
            if stage.mode == "fan_out":
                worker = _worker_node(stage, self.by_name, self.external, self.ids)
                if worker is not None:
                    worker_key = _worker_key(stage)
                    self._link(name, worker_key, Link(origin, worker, shape="thick", message="fan out"))
                    merge = self.by_name.get(stage.merge_stage or "")
                    if merge is not None:
                        self._link(worker_key, stage.merge_stage, Link(worker, merge, shape="thick", message="results"))
            if stage.transitions is None:
                following = bp.next_stage(name)
                if following is not None and following in self.by_name:
                    self._link(name, following, Link(origin, self.by_name[following]))
            for edge in stage.edges:
                target = self.by_name.get(edge.target)
                if target is None:
                    target = self.external.setdefault(
                        "missing:" + edge.target,
                        Node(self.ids(edge.target, "missing_"), escape_label(f"{edge.target} (missing)")),
                    )
                label = self._edge_label(name, edge)
                shape = "normal" if edge.is_normal else "dotted"
                self._link(name, edge.target, Link(origin, target, shape=shape, message=escape_label(label) if label else ""))
            if _ends_run(bp, name):
                needs_done = True
                self._link(name, DONE_ID, Link(origin, self.done))
        self.nodes.extend(self.external.values())
        if needs_done:
            self.nodes.append(self.done)

    def _edge_label(self, origin: str, edge: Any) -> str:
        parts: list[str] = []
        if edge.is_normal:
            if edge.hint:
                short = short_hint(edge.hint)
                if short != " ".join(edge.hint.split()):
                    number = len(self.hints) + 1
                    self.hints.append((number, origin, edge.target, edge.hint))
                    short = f"{short} [{number}]"
                parts.append(short)
        else:
            parts.append(_condition_label(edge))
        if edge.gate is not None:
            parts.append("gated")
        if edge.transform != "direct":
            parts.append(edge.transform)
        return " · ".join(parts)

    def text(self, direction: str, class_lines: list[str], link_styles: list[str]) -> str:
        nodes, links = list(self.nodes), list(self.links)
        if self.hints:
            # The note hangs under the last node by an invisible link, so it adds height, not width.
            legend = Node(LEGEND_ID, _legend_text(self.hints), shape="normal")
            nodes.append(legend)
            anchor = self.done if self.done in nodes else nodes[-2]
            links.append(Link(anchor, legend, shape="hidden", head_right="none"))
        # A stage that a loop leads back to (one the run came through) gets an invisible link to
        # where the first such loop starts, after every drawn link (so linkStyle numbers stay). The
        # layout (ELK's greedy cycle breaking; Mermaid passes it no other strategy) then places that
        # stage before its loops, so the graph reads from start to end; one per stage keeps the
        # invisible links, which take room of their own, few.
        looped: dict[str, Link] = {}
        for back in self.back_links():
            looped.setdefault(back.end.id_, back)
        links.extend(Link(back.end, back.origin, shape="hidden", head_right="none") for back in looped.values())
        # The title goes into YAML front matter; a JSON string is valid YAML whatever the name holds.
        chart = FlowChart(json.dumps(self.bp.name), nodes, links, orientation=direction)
        script = chart.script.rstrip("\n")
        head, sep, body = script.partition("\n---\n")
        lines = [head, *FRONT_MATTER_CONFIG, "---", body] if sep else [script]
        lines.extend(f"\tclassDef {name} {style}" for name, style in CLASS_STYLES.items())
        if self.hints:
            class_lines = [*class_lines, f"class {LEGEND_ID} hints"]
        lines.extend("\t" + line for line in class_lines)
        lines.extend("\t" + line for line in link_styles)
        return "\n".join(lines) + "\n"

    def back_links(self) -> list[Link]:
        """The links that lead back to a node the run passed on its way from ``start`` (the back
        edges of a depth-first walk from ``start``, links in drawing order; loops on one stage
        left out): the links a layout should draw against the direction of reading."""
        outgoing: dict[str, list[Link]] = {}
        for link in self.links:
            outgoing.setdefault(link.origin.id_, []).append(link)
        state: dict[str, int] = {}  # 1 on the current path, 2 finished
        back: list[Link] = []
        for root in self.nodes:
            if root.id_ in state:
                continue
            state[root.id_] = 1
            stack = [(root.id_, iter(outgoing.get(root.id_, [])))]
            while stack:
                node, pending = stack[-1]
                link = next(pending, None)
                if link is None:
                    state[node] = 2
                    stack.pop()
                    continue
                target = link.end.id_
                if state.get(target) == 1:
                    if target != node:
                        back.append(link)
                elif target not in state:
                    state[target] = 1
                    stack.append((target, iter(outgoing.get(target, []))))
        return back

    def class_lines(self, extra: dict[str, list[str]] | None = None) -> list[str]:
        return [f"class {','.join(members)} {group}" for group, members in self.groups(extra).items() if members]

    def groups(self, extra: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Node ids by class (entry, output, ...; ``extra`` adds a run's marks by stage name)."""
        bp = self.bp
        groups: dict[str, list[str]] = {name: [] for name in CLASS_STYLES if name != "hints"}
        for name, stage in bp.stages.items():
            node_id = self.by_name[name].id_
            if name == bp.entry_stage:
                groups["entry"].append(node_id)
            if stage.mode == "output" or stage.require_output:
                groups["output"].append(node_id)
            if stage.mode == "fan_out":
                groups["fanout"].append(node_id)
            if _ends_run(bp, name):
                groups["terminal"].append(node_id)
        for group, names in (extra or {}).items():
            groups[group].extend(self.by_name[n].id_ for n in names if n in self.by_name)
        return groups


def _legend_text(hints: list[tuple[int, str, str, str]]) -> str:
    """The note under the graph: every hint that was cut, in full, by its number."""
    rows = [f"[{n}] {origin} → {target}: {escape_label(hint, 200)}" for n, origin, target, hint in hints]
    return "<br>".join(rows)


def _condition_label(edge: Any) -> str:
    if edge.condition == "stuck":
        thresholds = [
            (edge.stuck_after_iterations, "turns"),
            (edge.stuck_after_same_file_edits, "edits"),
            (edge.stuck_after_tool_calls, "calls"),
            (edge.stuck_after_minutes, "min"),
        ]
        shown = [f"{v} {unit}" for v, unit in thresholds if v]
        if shown:
            return f"stuck: {', '.join(shown)}"
    return str(edge.condition)


def _stage_node(node_id: str, name: str, stage: Any) -> Node:
    label = name if stage.mode in ("autonomous", "interactive") else f"{name} · {stage.mode}"
    # Only shapes Mermaid draws the same way every time (boxes, polygons, circles): its stadium is
    # a path with jittered curves, so JupyterLab would save a new drawing, and mark the notebook
    # modified, on each opening. The label names the mode, the class colours an output stage.
    shape = "normal"
    if stage.mode in ("output", "interactive_points"):
        shape = "round-edge"
    elif stage.mode == "fan_out":
        shape = "hexagon"
    return Node(node_id, escape_label(label), shape=shape)


def blueprint_mermaid(bp: Any, direction: str | None = None, current: str | None = None) -> str:
    """The Mermaid flowchart text for ``bp``; ``current`` highlights one stage (a live run).

    ``direction`` is LR, TB, RL or BT; None picks :func:`default_direction`.
    """
    drawing = _Drawing(bp)
    extra = {"current": [current]} if current else None
    return drawing.text(direction or default_direction(bp), drawing.class_lines(extra), [])


class Diagram:
    """A Mermaid diagram for display: ``text/vnd.mermaid`` plus ``text/plain`` (JupyterLab draws
    the diagram itself, offline, only when no richer type is in the bundle), and ``image/svg+xml``
    from ``picture`` (Graphviz's drawing, for front ends that do not draw Mermaid) when it gives
    one (``picture`` returns None rather than fail: see picture.svg_or_none)."""

    def __init__(self, source: str, picture: Callable[[], str | None] | None = None) -> None:
        self.source = source
        self._picture = picture

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        bundle = {"text/vnd.mermaid": self.source, "text/plain": self.source}
        svg = self._picture() if self._picture is not None else None
        if svg:
            bundle["image/svg+xml"] = svg
        return bundle

    def __repr__(self) -> str:
        return self.source


def run_diagram(
    bp: Any,
    history: list[str],
    *,
    current: str | None = None,
    status: str = "running",
    direction: str | None = None,
) -> Diagram:
    """:func:`run_mermaid` as a displayable :class:`Diagram` (what ``run.graph()`` returns), with
    the same path drawn by Graphviz."""
    from lev_nb.blueprint.picture import svg_or_none

    return Diagram(run_mermaid(bp, history, current=current, status=status, direction=direction),
                   picture=lambda: svg_or_none(bp, history=list(history), current=current, status=status,
                                               direction=direction))


def run_mermaid(
    bp: Any,
    history: list[str],
    *,
    current: str | None = None,
    status: str = "running",
    direction: str | None = None,
) -> str:
    """``bp``'s flowchart with a run's path: the stages in ``history`` marked visited, the edges
    between consecutive stages drawn thick, and ``current`` (default: the last stage) highlighted,
    green when the run is complete, red when it failed or was cancelled."""
    drawing = _Drawing(bp)
    extra, taken = run_marks(drawing, history, current=current, status=status)
    link_styles = [f"linkStyle {','.join(str(i) for i in sorted(taken))} {PATH_LINK_STYLE}"] if taken else []
    return drawing.text(direction or default_direction(bp), drawing.class_lines(extra), link_styles)


def run_marks(
    drawing: _Drawing, history: list[str], *, current: str | None = None, status: str = "running"
) -> tuple[dict[str, list[str]], set[int]]:
    """A run's path on ``drawing``: the stages to mark by class (visited, and the current or last
    one by how the run ended) and the indexes of the links it took."""
    bp = drawing.bp
    current = current if current is not None else (history[-1] if history else None)
    taken: set[int] = set()
    steps = ([START_ID] if history and history[0] == bp.entry_stage else []) + list(history)
    if status == "complete" and history:
        steps.append(DONE_ID)
    visited = list(dict.fromkeys(history))
    for origin, target in zip(steps, steps[1:]):
        direct = drawing.link_index.get((origin, target))
        if direct:
            taken.add(direct[0])
            continue
        stage = bp.stages.get(origin)
        if stage is not None and stage.worker_target is not None and stage.merge_stage == target:
            worker = _worker_key(stage)
            for pair in ((origin, worker), (worker, target)):
                taken.update(drawing.link_index.get(pair, [])[:1])
            if worker in bp.stages:
                visited.append(worker)
    end_class = {"complete": "finished", "error": "failed", "cancelled": "failed"}.get(status, "current")
    return {"visited": visited, end_class: [current] if current else []}, taken


def stages_to_end(bp: Any) -> dict[str, int]:
    """For each stage, the fewest further stages a run enters before it can end there (0 where it
    can end), following the edges a model takes (always / llm_choice), fall-through and fan-out
    merges; stages that reach an end only through condition edges count those. Stages with no way
    to an end are left out."""
    forward: dict[str, list[tuple[str, bool]]] = {name: [] for name in bp.stages}
    for name, stage in bp.stages.items():
        if stage.transitions is None:
            following = bp.next_stage(name)
            if following is not None:
                forward[name].append((following, True))
        for edge in stage.edges:
            if edge.target in bp.stages:
                forward[name].append((edge.target, edge.is_normal))
        if stage.mode == "fan_out" and stage.merge_stage in bp.stages:
            forward[name].append((stage.merge_stage, True))

    def distances(normal_only: bool) -> dict[str, int]:
        reverse: dict[str, list[str]] = {name: [] for name in bp.stages}
        for origin, edges in forward.items():
            for target, normal in edges:
                if normal or not normal_only:
                    reverse[target].append(origin)
        found = {name: 0 for name in bp.stages if _ends_run(bp, name)}
        queue = deque(found)
        while queue:
            name = queue.popleft()
            for origin in reverse[name]:
                if origin not in found:
                    found[origin] = found[name] + 1
                    queue.append(origin)
        return found

    return {**distances(False), **distances(True)}


def _ends_run(bp: Any, name: str) -> bool:
    """Whether the run can end at ``name``: terminal, and not a fan-out stage that moves on to
    its merge stage, nor a worker stage (a worker's end is its own run's end, not this one's)."""
    stage = bp.stages[name]
    if stage.mode == "fan_out" and stage.merge_stage:
        return False
    if any(s.mode == "fan_out" and s.worker_stage == name for s in bp.stages.values()):
        return False
    return bool(bp.is_terminal(name))


def _worker_key(stage: Any) -> str:
    """The name the fan-out's worker goes by in the link index (a stage name or ``key:value``)."""
    key, value = stage.worker_target
    return value if key == "worker_stage" else f"{key}:{value}"


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
