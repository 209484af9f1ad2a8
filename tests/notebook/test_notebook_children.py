"""The run view lists the runs a run started (sub-agents and fan-out workers) with their status,
and each row's button opens that child's own view; driven through the widget's model, no browser."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, FnModel, call, say

import lev_nb
from lev_nb.messages import ToolResultBlock
from lev_nb.notebook import runview
from lev_nb.notebook.widget import RunWidget, follow, new_state, snapshot_bundle

RUN_TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))


def text_of(markup: str) -> str:
    markup = re.sub(r"<style>.*?</style>", "", markup, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def boss_run(tmp_path: Path) -> Any:
    folder = tmp_path / "boss"
    (folder / "helper").mkdir(parents=True)
    (folder / "agent.leviath").write_text(
        '[agent]\nname = "boss"\n[stages.lead]\navailable_tools = ["spawn_agent"]\nnudge = { enabled = false }\n'
        "[stages.lead.transitions]\n", encoding="utf-8")
    (folder / "helper" / "agent.leviath").write_text(
        '[agent]\nname = "helper"\n[stages.help]\navailable_tools = ["submit_output"]\nnudge = { enabled = false }\n'
        "[stages.help.transitions]\n", encoding="utf-8")

    def answer(request: Any) -> Any:
        seen = [b for m in request.messages for b in m.blocks() if isinstance(b, ToolResultBlock)]
        if request.stage == "lead":
            return say("done") if seen else call("spawn_agent", blueprint="helper", task="help me out", wait=True)
        return say("ok") if seen else call("submit_output", content="helped")

    return lev_nb.run(folder, task="lead", model=FnModel(answer), workdir=tmp_path / "work").wait(RUN_TIMEOUT_S)


def test_the_view_lists_a_sub_agent_and_its_button_opens_the_child_view(tmp_path: Path) -> None:
    run = boss_run(tmp_path)
    assert run.status == "complete", run.error
    [child] = run.children
    view = RunWidget(run)
    assert list(view.kid_rows) == [child.run_id]
    row_html, button, holder = view.kid_rows[child.run_id]
    assert "Started 1 run · 1 complete" in text_of(view.kids.children[0].value)
    assert f"complete helper (sub-agent) {child.run_id}" in text_of(row_html.value)
    assert button.description == "show" and holder.children == ()
    button.click()  # what a click in the browser does to the widget's model
    [child_view] = holder.children
    assert isinstance(child_view, RunWidget) and child_view.run is child
    assert "helper" in text_of(child_view.header.value) and "helped" in child_view.output.value
    assert button.description == "hide"
    button.click()
    assert holder.children == () and button.description == "show"
    # The parent's story tells of the spawn once; the children list tells of its end.
    lines = [text_of(v.value) for v in view.visits.children]
    assert any(f"Started the sub-agent helper ({child.run_id}): help me out" in line for line in lines)


def test_the_snapshot_lists_children_for_a_saved_notebook(tmp_path: Path) -> None:
    run = boss_run(tmp_path)
    [child] = run.children
    bundle = snapshot_bundle(run)
    assert f"data-run-id='{child.run_id}'" in bundle["text/html"]
    assert "Started 1 run · 1 complete" in text_of(bundle["text/html"])
    assert "started 1 run: 1 complete" in bundle["text/plain"]
    assert f"complete  helper (sub-agent) {child.run_id}" in bundle["text/plain"]


def test_fan_out_workers_are_listed_without_flooding_the_story() -> None:
    run = lev_nb.load(ROOT / "blueprints" / "research-brief").run("q", model="mock").wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    state = follow(run, new_state(run))
    assert len(state.children) == 3 and {c.kind for c in state.children.values()} == {"worker"}
    assert {c.status for c in state.children.values()} == {"complete"}
    text = runview.snapshot_text(state)
    assert "started 3 runs: 3 complete" in text and "(worker)" in text
    assert "Started the sub-agent" not in text  # workers are told by the fan-out's own lines


def test_long_child_lists_are_cut_with_a_count() -> None:
    from lev_nb.engine import events as ev

    state = runview.RunState("parent")
    for n in range(runview.CHILD_ROWS + 7):
        state.apply(ev.ChildStarted("parent", "split", child_id=f"w{n}", child_kind="worker", agent="wide"))
    state.apply(ev.ChildEnded("parent", "split", child_id="w0", child_kind="worker", status="error", error="boom"))
    markup = runview.children_html(state)
    assert markup.count("class='lev-child'") == runview.CHILD_ROWS
    assert "… and 7 more (run.children lists them all)" in text_of(markup)
    assert f"Started {runview.CHILD_ROWS + 7} runs · 1 error, {runview.CHILD_ROWS + 6} running" in text_of(markup)
    assert "boom" in text_of(markup)
