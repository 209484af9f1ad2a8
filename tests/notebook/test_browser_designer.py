"""The blueprint designer in a real JupyterLab (headless chromium, offline): typing into the
editor changes the findings and the graph, the Dry run button shows a run view that ends complete,
and the static copy is what an untrusted notebook shows. Screenshots go to
tests/results/screenshots/designer/ (not committed)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from lab_session import LabBrowser, LabServer, find_chromium
from support import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = ROOT / "tests" / "results" / "screenshots" / "designer"
DRAFT = '''[agent]
name = "notes"
entry_stage = "collect"

[stages.collect]
mode = "autonomous"
available_tools = ["reed_file"]
max_iterations = 4

[stages.collect.transitions.write]
hint = "Every change is noted"

[stages.write]
mode = "output"
max_iterations = 2

[stages.write.transitions]
'''
EDITOR = ".lev-designer-editor textarea"
FINDINGS = ".lev-designer-findings"


def _notebook(path: Path) -> None:
    cells = [
        "import lev_nb\ned = lev_nb.designer(" + repr(DRAFT) + ", delay=0.3)\ned",
    ]
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                     "source": src} for i, src in enumerate(cells)],
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LabServer, LabBrowser, Path]]:
    try:
        import jupyterlab  # noqa: F401
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"the browser test needs jupyterlab and playwright: {exc}")
    if find_chromium() is None:
        pytest.skip("the browser test needs Debian's chromium")
    root = tmp_path_factory.mktemp("lab-root")
    _notebook(root / "designer.ipynb")
    state = tmp_path_factory.mktemp("lab-state")
    env = dict(os.environ, LEV_HOME=str(state / "lev-home"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    server = LabServer(root, state, env)
    server.start()
    browser = None
    try:
        browser = LabBrowser(server, find_chromium() or "chromium")
        yield server, browser, root
    finally:
        if browser is not None:
            browser.close()
        server.stop()


def _graph_svg(page: Any) -> str:
    """The SVG JupyterLab drew for the designer's graph (its Mermaid renderer draws into an img)."""
    src = page.eval_on_selector(".lev-designer-graph .jp-RenderedMermaid img", "i => i.src")
    return unquote(src)


def _shot(page: Any, name: str) -> None:
    """The whole designer, the window made tall enough for it."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = page.eval_on_selector(".lev-designer", "e => e.scrollHeight")
    page.set_viewport_size({"width": 1400, "height": min(max(900, height + 300), 5000)})
    page.locator(".lev-designer").screenshot(path=str(SHOTS / name))
    page.set_viewport_size({"width": 1200, "height": 900})


def test_typing_in_the_designer_changes_the_findings_and_the_graph(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    server, browser, root = lab
    page = browser.page
    browser.open_notebook("designer.ipynb")
    browser.run_all()
    page.wait_for_selector(EDITOR, timeout=60_000)
    page.wait_for_function("(s) => document.querySelector(s) && document.querySelector(s).innerText.includes('unknown-tool')",
                           arg=FINDINGS, timeout=60_000)
    page.wait_for_selector(".lev-designer-graph .jp-RenderedMermaid img", timeout=60_000)
    assert "line 7" in page.inner_text(FINDINGS)  # available_tools = ["reed_file"]
    before = _graph_svg(page)
    assert "review" not in before

    # Type as a person does: fix the tool's name, then add a stage at the end.
    editor = page.locator(EDITOR)
    editor.click()
    text = editor.input_value()
    start = text.index("reed_file")
    editor.evaluate("(t, [a, b]) => t.setSelectionRange(a, b)", [start, start + len("reed")])
    page.keyboard.type("read")
    page.keyboard.press("Control+End")
    page.keyboard.type('\n[stages.review]\nmode = "autonomous"\nmax_iterations = 2\n', delay=15)
    page.wait_for_function(
        "(s) => { const t = document.querySelector(s).innerText; return !t.includes('unknown-tool') && t.includes('unreachable-stage'); }",
        arg=FINDINGS, timeout=60_000)
    findings = page.inner_text(FINDINGS)
    assert "✓ usable" in findings and re.search(r"line 1[89]", findings)
    page.wait_for_function("(b) => { const i = document.querySelector('.lev-designer-graph .jp-RenderedMermaid img');"
                           " return i && decodeURIComponent(i.src) !== b && decodeURIComponent(i.src).includes('review'); }",
                           arg=before, timeout=60_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    _shot(page, "typed.png")

    # A slip in the TOML shows its line, and the last good graph stays.
    page.keyboard.type("[stages.broken\n")
    page.wait_for_function("(s) => document.querySelector(s).innerText.includes('not valid TOML')", arg=FINDINGS,
                           timeout=60_000)
    assert "line 22" in page.inner_text(FINDINGS)
    assert "review" in _graph_svg(page)
    page.keyboard.press("Backspace")
    for _ in range(len("[stages.broken")):
        page.keyboard.press("Backspace")
    page.wait_for_function("(s) => document.querySelector(s).innerText.includes('✓ usable')", arg=FINDINGS,
                           timeout=60_000)

    # The dry run: a run view under the editor that ends complete with its final output.
    page.get_by_role("button", name="Dry run (mock)").click()
    page.wait_for_function(
        "() => { const v = document.querySelector('.lev-designer .lev-run-widget .lev-status[data-status]');"
        " return v && v.dataset.status === 'complete'; }", timeout=120_000)
    page.wait_for_function("() => (document.querySelector('.lev-designer .lev-output') || {}).innerText", timeout=60_000)
    assert "Final output" in page.inner_text(".lev-designer .lev-output")
    _shot(page, "dry-run.png")
    assert browser.outside == [], f"requests left 127.0.0.1: {browser.outside}"


def test_an_untrusted_copy_shows_the_static_design(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    server, browser, root = lab
    # The committed example, as a fresh clone opens it: untrusted, no kernel state.
    (root / "09-design-live.ipynb").write_bytes((ROOT / "notebooks" / "09-design-live.ipynb").read_bytes())
    page = browser.new_page()
    page.goto(f"{server.base}/lab/tree/09-design-live.ipynb?token={server.token}&reset")
    page.wait_for_selector(".jp-NotebookPanel .jp-OutputArea-output", timeout=90_000)
    page.wait_for_selector(".lev-designer-static", timeout=60_000)
    static = page.locator(".lev-designer-static").first
    text = static.inner_text()
    assert "[stages.review]" in text and "✓ usable" in text
    # Inline styles survive the sanitizer: the marked line numbers keep their colour.
    coloured = page.eval_on_selector_all(".lev-designer-static pre span", "ss => ss.filter(s => getComputedStyle(s).color === 'rgb(179, 92, 0)').length")
    assert coloured > 0
    assert "Error displaying widget" not in page.inner_text(".jp-NotebookPanel")
    SHOTS.mkdir(parents=True, exist_ok=True)
    static.screenshot(path=str(SHOTS / "untrusted-static.png"))
    page.close()
