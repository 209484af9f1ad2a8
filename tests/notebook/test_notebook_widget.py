"""The live run widget: traits after a run, its text/plain, and the fallback without ipywidgets."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

import lev_nb
from lev_nb.notebook import widget as widget_module
from lev_nb.notebook.widget import RunText, RunWidget, watch

TRIAGE = ROOT / "blueprints" / "triage"
RUN_TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))


def stage_rows(table_html: str) -> list[list[str]]:
    """The body rows of the stage table as lists of cell texts."""
    import re

    body = table_html.split("<tbody>", 1)[1]
    return [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body)]


def test_widget_follows_a_mock_run_to_completion() -> None:
    bp = lev_nb.load(TRIAGE)
    run = bp.run("R-1: crash on save", model="mock")
    view = RunWidget(run, bp.stage_names)
    run.wait(RUN_TIMEOUT_S)

    assert view.status == "complete"
    assert view.progress.bar_style == "success"
    assert view.progress.max == len(bp.stage_names) and view.progress.value == view.progress.max
    assert "triage" in view.header.value and run.run_id in view.header.value and "complete" in view.header.value
    # One row per stage visit: stage, visit, stage turns, tool calls (the mock walk is deterministic).
    assert stage_rows(view.stage_table.value) == [
        ["read", "1", "2", "1"], ["check", "1", "2", "1"], ["table", "1", "2", "1"],
    ]
    assert "completed: status=complete" in view.recent_events.value
    assert view.recent_events.value.count("<br>") == widget_module.RECENT_EVENTS - 1
    assert list(view.children) == [view.header, view.progress, view.stage_table, view.recent_events]


def test_repr_is_deterministic_and_is_the_widget_text_plain() -> None:
    run = lev_nb.load(TRIAGE).run("R-1", model="mock").wait(RUN_TIMEOUT_S)
    view = RunWidget(run)  # subscribed after the end: the replay alone fills it in
    assert repr(view) == f"<RunWidget {run.run_id} complete>"
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == repr(view)
    assert view.progress.max == 3  # no stage list: the bar is as long as the stages entered


def test_failed_run_shows_danger_and_the_error() -> None:
    failing = lev_nb.ScriptedModel([{"error": {"kind": "auth", "message": "invalid key"}}])
    run = lev_nb.load(TRIAGE).run("R-1", model=failing).wait(RUN_TIMEOUT_S)
    view = RunWidget(run)
    assert run.status == "error"
    assert view.status == "error"
    assert view.progress.bar_style == "danger"
    assert run.error and html.escape(run.error) in view.header.value
    assert [row[0] for row in stage_rows(view.stage_table.value)] == ["read", "table_after_error"]
    assert repr(view) == f"<RunWidget {run.run_id} error>"


def test_watch_returns_the_widget_it_displays(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[Any] = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    run = lev_nb.load(TRIAGE).run("R-1", model="mock").wait(RUN_TIMEOUT_S)
    view = lev_nb.notebook.watch(run)
    assert isinstance(view, RunWidget) and shown == [view]


def test_watch_falls_back_to_text_without_ipywidgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(widget_module, "_widgets", None)
    run = lev_nb.load(TRIAGE).run("R-1", model="mock").wait(RUN_TIMEOUT_S)
    view = watch(run, display=False)
    assert isinstance(view, RunText)
    assert repr(view) == repr(run) == f"<Run {run.run_id} complete stage='table'>"
    with pytest.raises(ImportError, match="ipywidgets"):
        RunWidget(run)
