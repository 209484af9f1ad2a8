"""Every bundled agent's graph reads from start to end: top to bottom (left to right for a small
one) in the Graphviz picture, and in the Mermaid text every link back to a stage the run came
through has an invisible twin pointing the way the run reads, so the layout (JupyterLab's ELK)
breaks each cycle at the loop back. The colours pinned in the Mermaid text are the ones that read
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


def cycles_left(text: str) -> list[str]:
    """The nodes on a cycle, or after one, once every link with an invisible twin the other way is dropped
    (loops on one stage and the legend's link left out)."""
    found = links(text)
    twins = {(a, b) for a, arrow, b in found if arrow == "~~~"}
    edges = [(a, b) for a, arrow, b in found
             if arrow != "~~~" and a != b and (b, a) not in twins]
    edges += [(a, b) for a, b in twins if b != graph.LEGEND_ID]
    nodes = {n for e in edges for n in e}
    incoming = {n: 0 for n in nodes}
    for _, b in edges:
        incoming[b] += 1
    ready = [n for n, k in incoming.items() if k == 0]
    while ready:  # Kahn's walk: what is never freed lies on a cycle or after one
        node = ready.pop()
        for a, b in edges:
            if a == node:
                incoming[b] -= 1
                if incoming[b] == 0:
                    ready.append(b)
    return sorted(n for n, k in incoming.items() if k > 0)


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
    assert cycles_left(text) == [], f"{agent}: the layout would have to pick which edge of these stages points back"
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
    assert "\ts_read ~~~ s_check\n" in text and "\ts_check ~~~ s_read\n" not in text
    assert cycles_left(text) == []
    # Without the twin the loop would be a cycle the layout breaks as it likes.
    assert {"s_check", "s_read"} <= set(cycles_left(text.replace("\ts_read ~~~ s_check\n", "")))


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
