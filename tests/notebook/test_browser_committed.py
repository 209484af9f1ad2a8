"""Every committed example notebook as a fresh clone opens it in a real JupyterLab (headless
chromium, offline): untrusted, with no kernel state, not run. Opening it does not mark it modified,
in the light theme or the dark one; no "Error displaying widget" shows; every run view's header keeps
agent, run id and status apart, and its status is final; every stage graph reads from start to end;
and the graphs stay readable through a theme switch with the notebook open: the edges, arrowheads,
edge labels, node labels and title, measured as drawn against what lies behind them, in both themes.
Screenshots go to tests/results/screenshots/committed/ (not committed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from diagram_look import measure_diagrams, out_of_order, unreadable
from lab_session import LabBrowser, LabServer
from support import ROOT
from test_browser import DARK, LIGHT, _wait_for_diagrams, lab  # noqa: F401  (the JupyterLab fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SHOTS = ROOT / "tests" / "results" / "screenshots" / "committed"
FINAL = {"complete", "error", "cancelled"}
MERMAID = "text/vnd.mermaid"


def _diagram_directions(notebook: Path) -> list[str]:
    """The direction of every Mermaid diagram the notebook shows, in order."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    texts = ["".join(o["data"][MERMAID]) for c in nb["cells"] if c["cell_type"] == "code"
             for o in c["outputs"] if MERMAID in o.get("data", {})]
    return [re.search(r"^flowchart (\w+)", t, re.M).group(1) for t in texts]  # type: ignore[union-attr]


def _dirty(browser: LabBrowser) -> bool:
    return bool(browser.page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty"))


def _open(browser: LabBrowser, relpath: str, diagrams: int) -> None:
    browser.open_notebook(relpath)
    browser.page.wait_for_selector(".jp-OutputArea-output", timeout=60_000)
    _wait_for_diagrams(browser, diagrams)


def _check_views(browser: LabBrowser, where: str) -> None:
    page = browser.page
    # A cell with HTML in its outputs is untrusted (one without rich outputs counts as trusted).
    trusted = page.evaluate("""() => {
        const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
        return [...Array(cells.length).keys()].map(i => cells.get(i)).filter(c => c.type === 'code' && c.trusted
            && [...Array(c.outputs.length).keys()].some(j => 'text/html' in (c.outputs.get(j).data || {}))).length;
    }""")
    assert not trusted, f"{where}: {trusted} cells with HTML outputs are trusted"
    shown = "\n".join(page.eval_on_selector_all(".jp-OutputArea", "areas => areas.map(a => a.innerText)"))
    assert "Error displaying widget" not in shown and "model not found" not in shown, where
    heads: list[str] = page.eval_on_selector_all(".lev-run .lev-head", "hs => hs.map(h => h.innerText)")
    for head in heads:
        words = head.split()
        # Agent, run id and status stay three words (they ran together: "code-fixercode-fixer-…complete").
        assert len(words) == 3 and words[1].startswith(words[0] + "-"), f"{where}: a header reads {head!r}"
        assert words[2] in FINAL, f"{where}: a run view saved as {words[2]!r}"
    for batch in page.eval_on_selector_all(".lev-batch-view", "bs => bs.map(b => b.innerText)"):
        assert "100% · " in batch, f"{where}: a batch view saved before its end: {batch!r}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_a_committed_notebook_opens_untrusted_unmodified_and_readable_in_both_themes(
        notebook: Path, lab: tuple[LabServer, LabBrowser, Path]) -> None:
    server, browser, _ = lab
    page = browser.page
    relpath = f"notebooks/{notebook.name}"
    directions = _diagram_directions(notebook)
    SHOTS.mkdir(parents=True, exist_ok=True)
    looks: dict[str, list[dict[str, Any]]] = {}
    try:
        # Opened in the light theme, as a fresh clone: nothing is run.
        _open(browser, relpath, len(directions))
        if page.evaluate("() => document.body.dataset.jpThemeName") != LIGHT:
            browser.set_theme(LIGHT)
            _open(browser, relpath, len(directions))
        _check_views(browser, f"{notebook.name} opened")
        assert not _dirty(browser), f"opening {notebook.name} marked it modified"
        looks["light"] = measure_diagrams(page)
        assert len(looks["light"]) == len(directions)
        assert out_of_order(looks["light"], directions) == [], notebook.name
        page.screenshot(path=str(SHOTS / f"{notebook.stem}-light.png"), full_page=True)

        # The theme switched with the notebook open: the same pictures on a dark page.
        browser.set_theme(DARK)
        looks["switched to dark"] = measure_diagrams(page)
        assert not _dirty(browser), f"switching the theme marked {notebook.name} modified"
        page.screenshot(path=str(SHOTS / f"{notebook.stem}-switched-dark.png"), full_page=True)

        # Opened in the dark theme: JupyterLab draws them again, and the drawing is the saved one.
        _open(browser, relpath, len(directions))
        assert not _dirty(browser), f"opening {notebook.name} in the dark theme marked it modified"
        _check_views(browser, f"{notebook.name} opened in the dark theme")
        looks["dark"] = measure_diagrams(page)

        # And back to light with it open.
        browser.set_theme(LIGHT)
        looks["switched to light"] = measure_diagrams(page)
    finally:
        browser.set_theme(LIGHT)
        server.shutdown_kernels()
    for theme, diagrams in looks.items():
        assert unreadable(diagrams) == [], f"{notebook.name}, {theme}"
    assert {d["page"] for d in looks["light"]} == {"255,255,255"} or not directions
    assert {d["page"] for d in looks["dark"]} != {"255,255,255"} or not directions
    assert browser.outside == [], f"requests left 127.0.0.1: {browser.outside}"
