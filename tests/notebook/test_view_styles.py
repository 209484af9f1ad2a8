"""The run view reads well where a notebook's <style> and data-* are stripped (JupyterLab with an
untrusted notebook, GitHub, nbviewer): inline styles only, no theme variables the sanitizer
drops, and a header whose words stay apart without any style (issue 27)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import lev_nb
from lev_nb.notebook import runview
from lev_nb.notebook.viewstyle import inline
from lev_nb.notebook.widget import RunWidget, snapshot_bundle

TRIAGE = Path(__file__).resolve().parents[2] / "blueprints" / "triage"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))


def unstyled_text(markup: str) -> str:
    """What a viewer that drops every style shows: the text, block elements on their own lines."""
    markup = re.sub(r"</(div|li|p|tr|summary)>", "\n", markup)
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_the_snapshot_carries_inline_styles_only() -> None:
    run = lev_nb.load(TRIAGE).run("R-1: the app crashes", model="mock").wait(60)
    page = snapshot_bundle(run)["text/html"]
    assert "<style" not in page and "var(--" not in page
    classed = re.findall(r"<(\w+)[^>]*\sclass='([^']*lev-[^']*)'([^>]*)>", page)
    assert classed and all("style='" in rest for _, _, rest in classed)
    # The header reads as words with no style at all (it ran together: "triagetriage-…complete").
    first = unstyled_text(page).strip().splitlines()[0]
    assert first == f"triage {run.run_id} complete"


def test_a_multi_line_task_shows_how_many_lines_follow() -> None:
    run = lev_nb.load(TRIAGE).run("R-1: the app crashes\nsteps: open it\nthen tap save", model="mock").wait(60)
    page = snapshot_bundle(run)["text/html"]
    assert "R-1: the app crashes (+2 lines)" in unstyled_text(page)


def test_the_live_view_uses_the_same_inline_styles() -> None:
    run = lev_nb.load(TRIAGE).run("R-1", model="mock").wait(60)
    view = RunWidget(run)
    for part in (view.header, view.progress, *view.visits.children, view.output):
        assert "<style" not in part.value and "var(--" not in part.value and " style='" in part.value


def test_a_status_chip_keeps_its_own_colour_over_the_class_style() -> None:
    marked = inline("<span class='lev-chip' style='background-color:#2e7d32'>complete</span>")
    style = re.search(r"style='([^']*)'", marked).group(1)
    assert style.endswith("background-color:#2e7d32") and "color:#fff" in style


def test_a_stage_waiting_for_its_first_answer_says_so() -> None:
    from lev_nb.explain.fold import RunState, Visit

    state = RunState("r-1", ["work"])
    state.status, state.agent = "running", "a"
    state.visits.append(Visit("work", 1, None, 0.0))
    assert runview.FIRST_ANSWER in html.unescape(runview.visit_html(state, 0))
    state.visits[0].turns = 1
    assert runview.FIRST_ANSWER not in html.unescape(runview.visit_html(state, 0))
