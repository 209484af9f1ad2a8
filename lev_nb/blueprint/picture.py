"""The stage graph as a picture (SVG or PNG), drawn offline by Graphviz's ``dot``.

Notebook front ends that do not draw Mermaid (VS Code, Colab, the classic Notebook, GitHub) show
this picture from the same display bundle; JupyterLab prefers the bundle's Mermaid text. It is the
graph of :mod:`lev_nb.blueprint.graph` (the same nodes, edges, labels and classes, taken from its
drawing), laid out from start to end: top to bottom, or left to right for a small graph.

Colours read on a light and on a dark page alike (the background is transparent): every node and
every edge label is filled with a light colour of its own and written in a dark one, and the lines
are a middle grey with at least 3:1 contrast against white and against near-black.

Without Graphviz installed the picture is simply not there: :func:`svg_or_none` gives None, and
:func:`render` (``lev graph --svg/--png``) raises :class:`GraphvizMissing`, saying what to install.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from typing import Any

from lev_nb.errors import CleanError

from .graph import (
    CLASS_STYLES, DONE_ID, LABEL_FILL, LABEL_TEXT, LEGEND_ID, LINE_COLOUR, NODE_FILL, NODE_STROKE, NODE_TEXT, START_ID,
    _Drawing, default_direction, run_marks,
)

__all__ = ["FORMATS", "GraphvizMissing", "dot_available", "render", "svg_or_none"]

FORMATS = ("svg", "png")
INSTALL_HINT = "install Graphviz, which provides it (Debian/Ubuntu: apt install graphviz; macOS: brew install graphviz)"
RENDER_TIMEOUT_S = 30.0

# Unmarked stages, lines and edge labels (classes from graph.CLASS_STYLES colour the rest).
FONT = "DejaVu Sans,Helvetica,Arial,sans-serif"
NODE_STYLE = {"fillcolor": NODE_FILL, "color": NODE_STROKE, "fontcolor": NODE_TEXT}
PATH_COLOUR = "#e8590c"  # the edges a run took, as in the Mermaid drawing
# Mermaid shape (its opening bracket) -> Graphviz shape and extra style.
SHAPES = {"[": ("box", ""), "(": ("box", "rounded"), "([": ("box", "rounded"), "[[": ("component", ""),
          "{{": ("hexagon", ""), "((": ("circle", ""), "(((": ("doublecircle", "")}


class GraphvizMissing(CleanError, RuntimeError):
    """Graphviz's ``dot`` program is not installed, so no picture of the graph can be drawn."""


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` program is on the PATH."""
    return shutil.which("dot") is not None


def render(
    bp: Any,
    fmt: str = "svg",
    *,
    direction: str | None = None,
    current: str | None = None,
    history: list[str] | None = None,
    status: str = "running",
) -> bytes:
    """``bp``'s stage graph as ``fmt`` (svg or png) bytes; with ``history``, the path a run took
    (as :func:`lev_nb.blueprint.graph.run_mermaid` marks it). Raises :class:`GraphvizMissing`
    without Graphviz, ValueError for another format."""
    import graphviz

    if fmt not in FORMATS:
        raise ValueError(f"no picture format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not dot_available():
        raise GraphvizMissing(f"drawing the graph as {fmt.upper()} needs Graphviz's `dot` program; {INSTALL_HINT}")
    source = dot_source(bp, direction=direction, current=current, history=history, status=status)
    try:
        return bytes(graphviz.Source(source).pipe(format=fmt, engine="dot", quiet=True))
    except graphviz.ExecutableNotFound as exc:  # removed since the check above
        raise GraphvizMissing(f"Graphviz's `dot` program cannot be run ({exc}); {INSTALL_HINT}") from None


def svg_or_none(bp: Any, **kwargs: Any) -> str | None:
    """:func:`render` as SVG text for a display bundle, or None when it cannot be drawn (no
    Graphviz, or ``dot`` failed): a bundle then carries its Mermaid text and plain text only."""
    if not dot_available():
        return None
    try:
        return render(bp, "svg", **kwargs).decode("utf-8")
    except (GraphvizMissing, OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return None  # graphviz.CalledProcessError is a SubprocessError: a display never fails


def dot_source(
    bp: Any,
    *,
    direction: str | None = None,
    current: str | None = None,
    history: list[str] | None = None,
    status: str = "running",
) -> str:
    """The DOT text of the picture (what :func:`render` hands to ``dot``)."""
    import graphviz

    drawing = _Drawing(bp)
    if history is not None:
        extra, taken = run_marks(drawing, history, current=current, status=status)
    else:
        extra, taken = ({"current": [current]} if current else {}), set()
    classes: dict[str, list[str]] = {}
    for group, members in drawing.groups(extra).items():
        for node_id in members:
            classes.setdefault(node_id, []).append(group)

    graph = graphviz.Digraph(name=bp.name, graph_attr={
        "rankdir": direction or default_direction(bp), "bgcolor": "transparent", "fontname": FONT,
        "nodesep": "0.35", "ranksep": "0.45", "pad": "0.1",
    }, node_attr={"fontname": FONT, "fontsize": "12", "style": "filled", **NODE_STYLE},
        edge_attr={"fontname": FONT, "fontsize": "10", "color": LINE_COLOUR, "arrowsize": "0.7"})
    for node in drawing.nodes:
        graph.node(node.id_, **_node_attrs(node, classes.get(node.id_, [])))
    for index, link in enumerate(drawing.links):
        attrs = {"penwidth": "2.5" if link.shape == "==" else "1.2"}
        if link.shape == "-.-":
            attrs["style"] = "dashed"
        if index in taken:
            attrs.update(color=PATH_COLOUR, penwidth="3")
        if link.message:
            attrs["label"] = _chip(_plain(link.message))
        graph.edge(link.origin.id_, link.end.id_, **attrs)
    if drawing.hints:
        # The full text of every cut hint, in a note under the graph (as the Mermaid drawing has).
        rows = [f"[{n}] {origin} → {target}: {' '.join(hint.split())}" for n, origin, target, hint in drawing.hints]
        graph.node(LEGEND_ID, label="\\l".join(graphviz.escape(r) for r in rows) + "\\l", shape="note",
                   **_style(CLASS_STYLES["hints"]))
        anchor = DONE_ID if any(n.id_ == DONE_ID for n in drawing.nodes) else drawing.nodes[-1].id_
        graph.edge(anchor, LEGEND_ID, style="invis")
    return graph.source


def _node_attrs(node: Any, groups: list[str]) -> dict[str, str]:
    """Shape, label and colours of one node (classes applied in CLASS_STYLES order, later wins)."""
    import graphviz

    shape, extra_style = SHAPES.get(node.shape.start, ("box", ""))
    styles = ["filled", *([extra_style] if extra_style else [])]
    attrs: dict[str, str] = {"shape": shape, "label": graphviz.escape(_plain(node.content))}
    if node.id_ in (START_ID, DONE_ID):
        attrs.update(fontsize="10", width="0.5", fixedsize="false", margin="0.02")
    for group in CLASS_STYLES:
        if group in groups:
            found = _style(CLASS_STYLES[group])
            if found.pop("style", None) == "dashed":
                styles.append("dashed")
            attrs.update(found)
    attrs["style"] = ",".join(dict.fromkeys(styles))
    return attrs


def _style(css: str) -> dict[str, str]:
    """A Mermaid class style (``fill:#..,stroke:#..,color:#..,stroke-width:3px``) as Graphviz attributes."""
    names = {"fill": "fillcolor", "stroke": "color", "color": "fontcolor"}
    attrs: dict[str, str] = {}
    for part in css.split(","):
        key, _, value = part.partition(":")
        if key in names:
            attrs[names[key]] = value
        elif key == "stroke-width":
            attrs["penwidth"] = value.removesuffix("px")
        elif key == "stroke-dasharray":
            attrs["style"] = "dashed"
    return attrs


def _plain(label: str) -> str:
    """A Mermaid label's text as written (Mermaid writes a double quote as ``#quot;``)."""
    return label.replace("#quot;", '"')


def _chip(text: str) -> str:
    """An edge label on a light chip of its own, so it reads on a light and on a dark page."""
    return (f'<<table border="0" cellborder="0" cellpadding="2" bgcolor="{LABEL_FILL}"><tr><td>'
            f'<font color="{LABEL_TEXT}">{html.escape(text)}</font></td></tr></table>>')
