"""Every bundled agent's graph reads from start to end: top to bottom (left to right for a small
one) in the Graphviz picture, and in the Mermaid text every stage a loop leads back to has an
invisible link forward to where the loop starts, so the layout (JupyterLab's ELK) places it before
its loops. The colours pinned in the Mermaid text are the ones that read
on a light and on a dark page. (The browser test measures the drawn diagrams in JupyterLab.)"""

from __future__ import annotations

import re

import pytest
from support import BLUEPRINTS, blueprint

from lev_nb.blueprint import graph, load
from lev_nb.blueprint.picture import dot_available, render

AGENTS = sorted(p.name for p in BLUEPRINTS.iterdir() if (p / "agent.leviath").is_file())
LINK = re.compile(r'^\t(\w+) ([-.=~>]+)(?:\|"[^"]*"\|)? (\w+)$', re.M)
NODE = re.compile(r'<g id="node\d+" class="node">\s*<title>([^<]+)</title>\s*<(ellipse|polygon|path)([^>]*)>')


def links(text: str) -> list[tuple[str, str, str]]:
    """(origin, arrow, end) of every link in a Mermaid flowchart."""
    return LINK.findall(text)


def looped_to(text: str) -> dict[str, set[str]]:
    """Each node a loop leads back to (a depth-first walk from ``start`` over the drawn links
    meets it again while still on its way from it), with the nodes those loops start from."""
    outgoing: dict[str, list[str]] = {}
    for a, arrow, b in links(text):
        if arrow != "~~~":
            outgoing.setdefault(a, []).append(b)
    found: dict[str, set[str]] = {}
    on_path: list[str] = []
    seen: set[str] = set()

    def walk(node: str) -> None:
        seen.add(node)
        on_path.append(node)
        for target in outgoing.get(node, []):
            if target in on_path and target != node:
                found.setdefault(target, set()).add(node)
            elif target not in seen:
                walk(target)
        on_path.pop()

    walk(graph.START_ID)
    return found


def missing_forward_links(text: str) -> list[str]:
    """The nodes a loop leads back to with no invisible link forward to where one of those loops
    starts (what makes the layout place them before their loops)."""
    hidden = {(a, b) for a, arrow, b in links(text) if arrow == "~~~"}
    return sorted(node for node, starts in looped_to(text).items()
                  if not any((node, start) in hidden for start in starts))


def picture_positions(svg: str) -> dict[str, tuple[float, float]]:
    """The centre of every node Graphviz drew, by node id."""
    found = {}
    for name, tag, attrs in NODE.findall(svg):
        if tag == "ellipse":
            x = float(re.search(r'cx="([-\d.]+)"', attrs).group(1))  # type: ignore[union-attr]
            y = float(re.search(r'cy="([-\d.]+)"', attrs).group(1))  # type: ignore[union-attr]
        else:
            numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", re.search(r'(?:points|d)="([^"]+)"', attrs).group(1))]  # type: ignore[union-attr]
            xs, ys = numbers[0::2], numbers[1::2]
            x, y = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
        found[name] = (x, y)
    return found


@pytest.mark.parametrize("agent", AGENTS)
def test_the_mermaid_graph_has_no_cycle_the_layout_must_guess_at(agent: str) -> None:
    text = load(BLUEPRINTS / agent).mermaid()
    assert missing_forward_links(text) == [], f"{agent}: the layout would have to guess which way these stages read"
    direction = "LR" if len(load(BLUEPRINTS / agent).stages) <= graph.MAX_LR_STAGES else "TB"
    assert f"flowchart {direction}\n" in text


@pytest.mark.parametrize("agent", AGENTS)
def test_the_picture_reads_from_start_to_end(agent: str) -> None:
    if not dot_available():
        pytest.skip("needs Graphviz's dot")
    bp = load(BLUEPRINTS / agent)
    direction = graph.default_direction(bp)
    where = picture_positions(render(bp).decode("utf-8"))
    axis = 1 if direction == "TB" else 0  # Graphviz's y grows downwards in its SVG
    along = {name: xy[axis] for name, xy in where.items() if name != graph.LEGEND_ID}
    stages = {n: v for n, v in along.items() if n not in (graph.START_ID, graph.DONE_ID)}
    entry = "s_" + bp.entry_stage
    assert along[graph.START_ID] < along[entry] <= min(stages.values()), (agent, along)
    assert along[graph.DONE_ID] > max(stages.values()), (agent, along)


def test_a_loop_back_is_the_link_against_the_reading_not_the_one_before_it() -> None:
    bp = blueprint("""
        [stages.read]
        mode = "autonomous"
        [stages.read.transitions.check]
        hint = "Done reading"
        [stages.check]
        mode = "autonomous"
        [stages.check.transitions.read]
        hint = "Read again"
        [stages.check.transitions.write]
        hint = "All good"
        [stages.write]
        mode = "output"
        """)
    text = bp.mermaid()
    assert looped_to(text) == {"s_read": {"s_check"}}
    assert "\ts_read ~~~ s_check\n" in text and "\ts_check ~~~ s_read\n" not in text
    assert missing_forward_links(text) == []
    assert missing_forward_links(text.replace("\ts_read ~~~ s_check\n", "")) == ["s_read"]


def test_the_pinned_colours_read_on_white_and_on_jupyterlab_dark() -> None:
    def luminance(colour: str) -> float:
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    def ratio(a: str, b: str) -> float:
        x, y = sorted((luminance(a), luminance(b)))
        return (y + 0.05) / (x + 0.05)

    for page in ("#ffffff", "#111111"):
        assert ratio(graph.LINE_COLOUR, page) >= 4.2 and ratio("#e8590c", page) >= 3
    assert ratio(graph.NODE_TEXT, graph.NODE_FILL) >= 4.5 and ratio(graph.LABEL_TEXT, graph.LABEL_FILL) >= 4.5
    text = load(BLUEPRINTS / "triage").mermaid()
    assert "  theme: base\n" in text and f'    lineColor: "{graph.LINE_COLOUR}"' in text
