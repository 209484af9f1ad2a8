"""Every example notebook, run in a real JupyterLab in headless chromium, offline.

Starts JupyterLab on 127.0.0.1 (a free port, a token, a temporary copy of notebooks/ and the
bundled agents, LEV_HOME in a temporary folder), opens each notebook in Debian's chromium through
Playwright, runs all cells and checks what a person would see: every Blueprint display drawn as a
diagram, no error outputs, every run view at its final state showing the final output; then saves,
stops the kernel, reopens the notebook and checks that the static snapshots are what shows (not
"model not found"). Any request that leaves the server fails the test. Light and dark screenshots
go to tests/results/screenshots/ (not committed).

``LEV_UPDATE_NOTEBOOKS=1`` copies the executed, saved notebooks back into notebooks/ (that is how
the committed notebooks are kept fully executed) and the screenshots the README shows into
docs/images/ (README_IMAGES).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_session import LabBrowser, LabServer, find_chromium
from support import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RESULTS = ROOT / "tests" / "results" / "screenshots"
# Screenshots the README shows: notebook -> {screenshot: docs/images name}. The planner-implementer
# replay in the gallery: the path its run took through the graph, and the run view.
README_IMAGES = {"07-bundled-agents": {"light-03.png": "graph.png", "light-04.png": "run-view.png"}}
LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"
RUN_VIEWS_TIMEOUT_S = 120
MIN_DIAGRAM_SCALE = 0.6  # Mermaid's 16px text drawn at >= ~10px
# The widget's own view before a run's final snapshot replaces it.
LIVE_VIEW = ".lev-run-widget"
RUN_VIEW = "div.lev-run[data-run-id]"


def _missing() -> str | None:
    try:
        import jupyterlab  # noqa: F401
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"the browser test needs jupyterlab and playwright (pip install -e '.[test]'): {exc}"
    if find_chromium() is None:
        return "the browser test needs Debian's chromium (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LabServer, LabBrowser, Path]]:
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser test: {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("lab-root")
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "blueprints", root / "blueprints", symlinks=False)
    state = tmp_path_factory.mktemp("lab-state")
    env = dict(os.environ, LEV_HOME=str(state / "lev-home"))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        env.pop(name, None)
    server = LabServer(root, state, env)
    server.start()
    browser = None
    try:
        browser = LabBrowser(server, find_chromium() or "chromium")
        # The guard works: a request to another host is refused in the browser and recorded.
        browser.page.goto("about:blank")
        browser.page.evaluate("fetch('http://lev-nb-offline-check.invalid/x').catch(() => null)")
        assert browser.outside == ["http://lev-nb-offline-check.invalid/x"]
        browser.outside.clear()
        yield server, browser, root
    finally:
        if browser is not None:
            browser.close()
        server.stop()


EDGE_LABEL = re.compile(
    r'<g class="edgeLabel" transform="translate\(([-\d.e]+), ([-\d.e]+)\)"><g class="label"[^>]*?'
    r'transform="translate\(([-\d.e]+), ([-\d.e]+)\)"><foreignObject width="([\d.e]+)" height="([\d.e]+)"'
)


def edge_label_boxes(svg: str) -> list[tuple[float, float, float, float]]:
    """(left, top, right, bottom) of every non-empty edge label in a Mermaid SVG."""
    boxes = []
    for x, y, dx, dy, w, h in EDGE_LABEL.findall(svg):
        left, top, width, height = float(x) + float(dx), float(y) + float(dy), float(w), float(h)
        if width > 0 and height > 0:
            boxes.append((left, top, left + width, top + height))
    return boxes


def overlapping(boxes: list[tuple[float, float, float, float]], slack: float = 1.0) -> list[tuple[int, int]]:
    """Pairs of boxes that cover each other by more than ``slack`` pixels each way."""
    pairs = []
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            b = boxes[j]
            if min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack:
                pairs.append((i, j))
    return pairs


def test_overlap_finder() -> None:
    assert overlapping([(0, 0, 10, 10), (5, 5, 15, 15), (20, 0, 30, 10)]) == [(0, 1)]
    svg = ('<g class="edgeLabel" transform="translate(50, 20)"><g class="label" data-id="x" '
           'transform="translate(-10, -5)"><foreignObject width="20" height="10">')
    assert edge_label_boxes(svg) == [(40.0, 15.0, 60.0, 25.0)]


def _wait_for_run_views(browser: LabBrowser) -> None:
    """Until no live run widget is left and every run view shows a terminal status."""
    browser.page.wait_for_function(
        """([live, view]) => {
            if (document.querySelectorAll(live).length) return false;
            const views = [...document.querySelectorAll(view)];
            return views.every(v => ['complete', 'error', 'cancelled'].includes(v.dataset.status));
        }""",
        arg=[LIVE_VIEW, RUN_VIEW],
        timeout=RUN_VIEWS_TIMEOUT_S * 1000,
    )


def _wait_for_diagrams(browser: LabBrowser, expected: int) -> None:
    browser.page.wait_for_function(
        """(n) => document.querySelectorAll('.jp-RenderedMermaid img, .jp-RenderedMermaid.jp-mod-warning').length >= n
              && [...document.querySelectorAll('.jp-RenderedMermaid img')].every(i => i.complete)""",
        arg=expected,
        timeout=60_000,
    )


def _check_page(browser: LabBrowser, outputs: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """What every notebook must show; returns the run views found."""
    diagrams = [o for o in outputs if "text/vnd.mermaid" in o.get("data", {})]
    _wait_for_diagrams(browser, len(diagrams))
    page = browser.page
    assert page.locator(".jp-RenderedMermaid.jp-mod-warning").count() == 0, f"{where}: a diagram failed to render"
    sizes = page.eval_on_selector_all(
        ".jp-RenderedMermaid img",
        "imgs => imgs.map(i => [i.naturalWidth, i.clientWidth, Number(i.getAttribute('width') || i.clientWidth)])",
    )
    assert len(sizes) == len(diagrams), f"{where}: {len(diagrams)} Blueprint displays, {len(sizes)} diagrams drawn"
    for natural, shown, drawn in sizes:
        assert natural > 0 and shown > 0, f"{where}: an empty diagram"
        assert shown / drawn >= MIN_DIAGRAM_SCALE, f"{where}: a diagram shrunk to {shown}/{drawn} of its size"
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, f"{where}: error outputs: {[(e.get('ename'), e.get('evalue')) for e in errors]}"
    assert "Error displaying widget" not in page.inner_text(".jp-NotebookPanel"), f"{where}: a widget is missing"
    views = page.eval_on_selector_all(
        RUN_VIEW,
        """vs => vs.map(v => ({
            id: v.dataset.runId, status: v.dataset.status,
            output: (v.querySelector('.lev-output') || {}).innerText || '',
        }))""",
    )
    for view in views:
        assert view["status"] in ("complete", "error", "cancelled"), f"{where}: run {view['id']} is {view['status']}"
        assert view["output"].strip().startswith("Final output"), f"{where}: run {view['id']} shows no final output"
    return views


def _screenshots(browser: LabBrowser, folder: Path, tag: str) -> None:
    """The whole page, then each output whole (the window is made tall enough for the tallest)."""
    folder.mkdir(parents=True, exist_ok=True)
    page = browser.page
    page.screenshot(path=str(folder / f"{tag}-page.png"))
    viewport = page.viewport_size or {"width": 1200, "height": 900}
    tallest = page.eval_on_selector_all(".jp-Cell-outputArea", "els => Math.max(0, ...els.map(e => e.scrollHeight))")
    page.set_viewport_size({"width": viewport["width"], "height": min(max(viewport["height"], tallest + 300), 6000)})
    try:
        areas = page.locator(".jp-Cell-outputArea")
        for index in range(areas.count()):
            area = areas.nth(index)
            box = area.bounding_box()
            if box is None or box["height"] < 4:
                continue
            area.screenshot(path=str(folder / f"{tag}-{index:02d}.png"), timeout=10_000)
    finally:
        page.set_viewport_size(viewport)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_in_jupyterlab(notebook: Path, lab: tuple[LabServer, LabBrowser, Path]) -> None:
    server, browser, root = lab
    relpath = f"notebooks/{notebook.name}"
    shots = RESULTS / notebook.stem
    shutil.rmtree(shots, ignore_errors=True)

    # Run every cell, as a new user would, in the light theme: from no outputs on a freshly loaded
    # page, so JupyterLab numbers the diagrams it draws from 0, as it does when the saved file is
    # opened; the drawings it saves are then the ones it draws on opening (the file is not modified).
    browser.open_notebook(relpath)
    browser.set_theme(LIGHT)
    browser.command("notebook:clear-all-cell-outputs")
    browser.save()
    browser.open_notebook(relpath)
    browser.run_all()
    _wait_for_run_views(browser)
    outputs = browser.notebook_outputs()
    live_views = _check_page(browser, outputs, "after running")
    _screenshots(browser, shots, "light")
    browser.save()

    saved = json.loads((root / relpath).read_text(encoding="utf-8"))
    code = [c for c in saved["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), "a cell did not run"
    # JupyterLab keeps the SVG it drew: no two edge labels of a diagram cover each other.
    drawn = ["".join(o["data"]["image/svg+xml"]) for c in code for o in c.get("outputs", []) if "image/svg+xml" in o.get("data", {})]
    assert len(drawn) == len([o for o in outputs if "text/vnd.mermaid" in o.get("data", {})])
    for svg in drawn:
        boxes = edge_label_boxes(svg)
        assert boxes and not overlapping(boxes), f"overlapping edge labels in a diagram of {notebook.name}"
    for cell in code:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            # A run view's output keeps only its static snapshot once the run ended.
            if "application/vnd.jupyter.widget-view+json" in data:
                assert "text/html" in data, "a widget output without a static snapshot"

    # Reopen with no kernel state left: the static snapshots are what shows.
    server.shutdown_kernels()
    browser.page.reload()
    browser.open_notebook(relpath)
    reopened = _check_page(browser, browser.notebook_outputs(), "after reopening")
    assert sorted(v["id"] for v in reopened) == sorted(v["id"] for v in live_views)
    _screenshots(browser, shots, "reopened-light")

    browser.set_theme(DARK)
    browser.page.reload()
    browser.open_notebook(relpath)
    _check_page(browser, browser.notebook_outputs(), "in the dark theme")
    _screenshots(browser, shots, "reopened-dark")
    browser.set_theme(LIGHT)

    assert browser.outside == [], f"requests left 127.0.0.1: {browser.outside}"
    for shot, name in README_IMAGES.get(notebook.stem, {}).items():
        assert (shots / shot).is_file(), f"the README's {name} is missing: no {shot}"
    if os.environ.get("LEV_UPDATE_NOTEBOOKS"):
        shutil.copyfile(root / relpath, notebook)
        for shot, name in README_IMAGES.get(notebook.stem, {}).items():
            (ROOT / "docs" / "images").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shots / shot, ROOT / "docs" / "images" / name)
