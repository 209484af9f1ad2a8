"""The stage graph as a picture drawn by Graphviz (lev_nb.blueprint.picture, issue 27): in every
blueprint's display bundle beside the Mermaid text, from ``lev graph --svg/--png``, readable in a
light and a dark theme, reading from start to end; and simply absent without Graphviz."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT, Lev

import lev_nb
from lev_nb.blueprint import load
from lev_nb.blueprint.picture import (LABEL_FILL, LABEL_TEXT, LINE_COLOUR, NODE_STYLE, PATH_COLOUR, GraphvizMissing,
                                      dot_available, dot_source, render)

TRIAGE = ROOT / "blueprints" / "triage"
needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz's dot is not installed")
# The page colours of JupyterLab's, VS Code's and GitHub's light and dark themes, about.
LIGHT_PAGE, DARK_PAGE = "#ffffff", "#1e1e1e"


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def node_y(svg: str, node_id: str) -> float:
    """The vertical centre of a node in Graphviz's SVG (smaller is higher on the page)."""
    match = re.search(rf"<title>{node_id}</title>\s*<(?:ellipse|polygon|path)[^>]*?(?:cy=\"([-\d.]+)\"|points=\"[-\d.]+,([-\d.]+))", svg)
    assert match, node_id
    return float(match.group(1) or match.group(2))


@needs_dot
def test_a_blueprint_displays_an_svg_beside_its_mermaid() -> None:
    bp = load(TRIAGE)
    bundle = bp._repr_mimebundle_()
    assert set(bundle) == {"text/vnd.mermaid", "text/plain", "image/svg+xml"}
    svg = bundle["image/svg+xml"]
    assert "<svg" in svg
    for stage in bp.stage_names:
        assert f"<title>s_{stage}</title>" in svg
    # Edge labels: a hint edge and a condition edge, each on a light chip with dark text.
    assert "The labels are right" in svg and "dead_end" in svg and "error" in svg
    assert f'fill="{LABEL_FILL}"' in svg and f'fill="{LABEL_TEXT}"' in svg
    assert "[1] read → read: Some reports were not labelled yet; keep going" in svg  # the cut hint, in full
    # The graph reads from start to end: top to bottom here.
    assert node_y(svg, "lev_start") < node_y(svg, "s_read") < node_y(svg, "s_check") < node_y(svg, "lev_done")


@needs_dot
def test_a_small_graph_reads_left_to_right_and_the_direction_can_be_chosen() -> None:
    small = lev_nb.load('[agent]\nname = "two"\n[stages.a]\n[stages.a.transitions]\nb = {}\n[stages.b]\n[stages.b.transitions]\n')
    assert "rankdir=LR" in dot_source(small)
    assert "rankdir=TB" in dot_source(load(TRIAGE)) and "rankdir=LR" in dot_source(load(TRIAGE), direction="LR")


def test_colours_read_on_a_light_and_a_dark_page() -> None:
    # Lines are graphics: 3:1 against both pages. Text always sits on its own light fill: 4.5:1.
    assert contrast(LINE_COLOUR, LIGHT_PAGE) >= 3 and contrast(LINE_COLOUR, DARK_PAGE) >= 3
    assert contrast(PATH_COLOUR, LIGHT_PAGE) >= 3 and contrast(PATH_COLOUR, DARK_PAGE) >= 3
    assert contrast(LABEL_FILL, LABEL_TEXT) >= 4.5
    assert contrast(NODE_STYLE["fillcolor"], NODE_STYLE["fontcolor"]) >= 4.5
    for agent in ("triage", "research-brief", "code-fixer"):
        bp = lev_nb.load(ROOT / "blueprints" / agent if (ROOT / "blueprints" / agent).exists() else agent)
        history = bp.stage_names[:2]
        for source in (dot_source(bp), dot_source(bp, history=history, status="error")):
            assert "bgcolor=transparent" in source
            # Every node that sets a fill of its own (a class) sets its text colour with it.
            for line in source.splitlines():
                fill = re.search(r'fillcolor="(#\w{6})"', line)
                if fill and "node [" not in line:
                    text = re.search(r'fontcolor="(#\w{6})"', line)
                    assert text and contrast(fill.group(1), text.group(1)) >= 4.5, line


@needs_dot
def test_a_runs_graph_shows_its_path_in_the_svg_too(tmp_path: Path) -> None:
    bp = lev_nb.load(TRIAGE)
    run = bp.run("R-1", model="mock", home=tmp_path).wait(30)
    bundle = run.graph()._repr_mimebundle_()
    svg = bundle["image/svg+xml"]
    assert f'stroke="{PATH_COLOUR}"' in svg  # the edges the run took
    assert 'fill="#c9efd3"' in svg  # the stage it ended in, as finished


def test_without_graphviz_the_bundle_has_no_svg_and_pictures_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch, lev: Lev, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
    bp = load(TRIAGE)
    assert set(bp._repr_mimebundle_()) == {"text/vnd.mermaid", "text/plain"}
    with pytest.raises(GraphvizMissing, match="install Graphviz"):
        bp.picture("png")
    out = lev("graph", str(TRIAGE), "--svg", str(tmp_path / "g.svg"))
    assert out.returncode == 1 and not (tmp_path / "g.svg").exists()
    assert out.stderr.startswith("lev graph: drawing the graph as SVG needs Graphviz's `dot` program; install Graphviz")
    assert "Traceback" not in out.stderr


@needs_dot
def test_lev_graph_writes_svg_and_png(lev: Lev, tmp_path: Path) -> None:
    svg, png = tmp_path / "g.svg", tmp_path / "g.png"
    out = lev("graph", str(TRIAGE), "--svg", str(svg), "--png", str(png))
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""  # the Mermaid text is not printed when a picture is asked for
    assert "<title>s_check</title>" in svg.read_text(encoding="utf-8")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert svg.read_bytes() == render(load(TRIAGE), "svg")  # deterministic


def test_an_unknown_picture_format_is_refused() -> None:
    with pytest.raises(ValueError, match="no picture format 'gif'"):
        render(load(TRIAGE), "gif")
