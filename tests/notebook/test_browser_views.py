"""The run views in a real JupyterLab in headless chromium (issue 27): a committed notebook opened
untrusted reads well from inline styles alone, in the light and the dark theme, and opening it
does not mark it modified; a batch view reopened after a save shows its final snapshot; a fan-out
run started the default way shows a multi-line task as its first line and "+N lines", calls its
workers workers and tells its events in sentences, live and reopened. Screenshots go to
tests/results/screenshots/views/ (not committed). (Every committed notebook, in both themes:
test_browser_committed.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_session import LabBrowser, LabServer
from support import ROOT
from test_browser import DARK, LIGHT, _wait_for_run_views, lab  # noqa: F401  (the JupyterLab fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = ROOT / "tests" / "results" / "screenshots" / "views"
TIMEOUT_MS = 60_000

def write_notebook(root: Path, name: str, cells: list[str]) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "notebooks" / name)
    return f"notebooks/{name}"


def dirty(browser: LabBrowser) -> bool:
    return bool(browser.page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty"))


def test_a_committed_notebook_opened_untrusted_reads_well_in_both_themes(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    _, browser, _ = lab
    page = browser.page
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.open_notebook("notebooks/06-a-person-in-the-loop.ipynb")
    browser.set_theme(LIGHT)
    page.wait_for_selector(".lev-run .lev-head", timeout=TIMEOUT_MS)
    # Untrusted: the sanitizer kept no <style> of ours and no data-*, only the inline styles.
    trusted = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(0).trusted")
    assert not trusted
    heads = page.eval_on_selector_all(".lev-run .lev-head", "hs => hs.map(h => h.innerText)")
    # Agent, run id and status stay three words (they ran together: "code-fixercode-fixer-…complete").
    assert heads and all(len(h.split()) == 3 and h.split()[1].startswith(h.split()[0] + "-") for h in heads), heads
    look = page.eval_on_selector(".lev-run .lev-callout", """c => {
        const s = getComputedStyle(c);
        const chip = getComputedStyle(document.querySelector('.lev-run .lev-chip'));
        return {border: s.borderLeftWidth, head: getComputedStyle(document.querySelector('.lev-run .lev-head')).display,
                chip: chip.backgroundColor, chipText: chip.color};
    }""")
    assert look["border"] == "3px" and look["head"] == "flex", look
    assert look["chip"] != "rgba(0, 0, 0, 0)" and look["chipText"] == "rgb(255, 255, 255)", look
    assert "Asked a person" in page.inner_text(".jp-NotebookPanel")
    page.locator(".lev-run").first.screenshot(path=str(SHOTS / "untrusted-light.png"))
    assert not dirty(browser), "opening the notebook marked it modified"
    browser.set_theme(DARK)
    page.locator(".lev-run").first.screenshot(path=str(SHOTS / "untrusted-dark.png"))
    text = page.eval_on_selector(".lev-run .lev-agent", "a => getComputedStyle(a).color")
    assert text != "rgb(0, 0, 0)", "the text does not follow the dark theme"
    browser.set_theme(LIGHT)


def test_a_batch_view_reopened_shows_its_final_snapshot(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    server, browser, root = lab
    page = browser.page
    triage = str(ROOT / "blueprints" / "triage")
    relpath = write_notebook(root, "batch.ipynb", [
        f"import lev_nb\nout = lev_nb.run_many({triage!r}, ['R-1: crash', 'R-2: slow', 'R-3: typo'], model='mock', processes=2)",
        "out",
    ])
    browser.open_notebook(relpath)
    browser.run_all()
    page.wait_for_selector(".lev-batch-table table", timeout=TIMEOUT_MS)
    browser.save()
    saved = json.loads((root / relpath).read_text(encoding="utf-8"))
    first: list[dict[str, Any]] = saved["cells"][0]["outputs"]
    assert all("application/vnd.jupyter.widget-view+json" not in o.get("data", {}) for o in first), first
    server.shutdown_kernels()
    page.reload()
    browser.open_notebook(relpath)
    page.wait_for_selector(".lev-batch-view", timeout=TIMEOUT_MS)
    shown = page.inner_text(".jp-NotebookPanel")
    assert "Error displaying widget" not in shown and "model not found" not in shown
    assert "100% · " in shown and "3/3 finished" in shown
    page.locator(".jp-Cell-outputArea").first.screenshot(path=str(SHOTS / "batch-reopened.png"))


EVENT_KEYS = re.compile(r"\b[a-z]+_[a-z_]+: [a-z_]+=")  # an event as its raw fields: "child_ended: child_id=…"


def _fan_out_view_reads_well(page: Any, where: str) -> None:
    view = page.inner_text(".lev-run")
    task = page.inner_text(".lev-run .lev-task")
    assert "\n" not in task.strip() and "(+2 lines)" in task, f"{where}: the task reads {task!r}"
    assert "worker" in view and "sub-agent" not in view, f"{where}: a fan-out worker is called a sub-agent"
    assert not EVENT_KEYS.search(view), f"{where}: an event line is not a sentence: {EVENT_KEYS.search(view)}"


def test_a_fan_out_run_started_the_default_way_reads_well_live_and_reopened(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    """A multi-line task shows its first line and "+N lines"; the fan-out's workers are workers, not
    sub-agents; every event line is a sentence; in the live view and in the snapshot reopened."""
    server, browser, root = lab
    page = browser.page
    brief = str(ROOT / "blueprints" / "research-brief")
    relpath = write_notebook(root, "fan-out.ipynb", [
        "import tempfile\nimport lev_nb\n"
        f"run = lev_nb.load({brief!r}).run('Tidal power\\nfor a small island\\nwith a budget', model='mock', "
        "workdir=tempfile.mkdtemp())\nrun.widget()",
    ])
    browser.open_notebook(relpath)
    browser.run_all()
    _wait_for_run_views(browser)
    _fan_out_view_reads_well(page, "live")
    browser.save()
    server.shutdown_kernels()
    page.reload()
    browser.open_notebook(relpath)
    page.wait_for_selector(".lev-run .lev-task", timeout=TIMEOUT_MS)
    assert "Error displaying widget" not in page.inner_text(".jp-NotebookPanel")
    _fan_out_view_reads_well(page, "reopened")
    page.locator(".lev-run").first.screenshot(path=str(SHOTS / "fan-out-reopened.png"))
