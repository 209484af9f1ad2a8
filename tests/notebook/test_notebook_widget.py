"""The live run view: what it shows, honest progress, sentences instead of reprs, the error once,
throttled and thread-safe updates, the static snapshot every display carries, and the fallback
without ipywidgets."""

from __future__ import annotations

import html
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

import lev_nb
from lev_nb.engine import events as ev
from lev_nb.engine.eventlog import EventLog
from lev_nb.notebook import runview
from lev_nb.notebook import widget as widget_module
from lev_nb.notebook.widget import VIEW_MIME, RunText, RunWidget, new_state, snapshot_bundle, watch

TRIAGE = ROOT / "blueprints" / "triage"
RUN_TIMEOUT_S = 60
TASK = "R-1: crash on save\nR-2: please add a dark theme"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))


def mock_run() -> Any:
    return lev_nb.load(TRIAGE).run(TASK, model="mock").wait(RUN_TIMEOUT_S)


def failed_run() -> Any:
    failing = lev_nb.ScriptedModel([{"error": {"kind": "auth", "message": "invalid key"}}])
    return lev_nb.load(TRIAGE).run("R-1", model=failing).wait(RUN_TIMEOUT_S)


def text_of(markup: str) -> str:
    """The visible text of an HTML fragment (style blocks and tags dropped)."""
    markup = re.sub(r"<style>.*?</style>", "", markup, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def chips(progress_html: str) -> list[tuple[str, str]]:
    """The stage strip as (classes, text) pairs."""
    return [(c, html.unescape(t)) for c, t in re.findall(r"<span class='(lev-stage[^']*)'(?: style='[^']*')?>(.*?)</span>", progress_html)]


# -- what the view shows ----------------------------------------------------------------------
def test_widget_follows_a_mock_run_to_completion() -> None:
    run = lev_nb.load(TRIAGE).run(TASK, model="mock")
    view = RunWidget(run)  # no stages=: it finds the blueprint's own
    run.wait(RUN_TIMEOUT_S)
    deadline = time.monotonic() + 5
    while view.status != "complete" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert view.status == "complete"
    meta = run.meta
    header = text_of(view.header.value)
    assert "triage" in header and run.run_id in header
    assert "data-status='complete'" in view.header.value
    assert "R-1: crash on save" in header and "dark theme" not in header  # the task's first line
    calls = sum(1 for e in run.events.snapshot() if e.kind == "model_call")
    assert f"model calls {calls}" in " ".join(header.split())
    assert f"tool calls {meta['tool_calls']}" in " ".join(header.split())
    assert f"{meta['prompt_tokens']:,} / {meta['completion_tokens']:,}" in header
    assert "elapsed" in header
    # Every stage of the blueprint, in its order; the visited ones marked, the end highlighted.
    assert chips(view.progress.value) == [
        ("lev-stage visited", "✓ read"), ("lev-stage visited", "✓ check"),
        ("lev-stage", "table_after_error"), ("lev-stage current complete", "✓ table"),
    ]
    assert "width:100%" in view.progress.value
    assert [text_of(v.value).split()[0] for v in view.visits.children] == ["read", "check", "table"]
    assert "<table class=" in view.output.value and "dry run" in view.output.value
    assert view.error.value == ""
    assert list(view.children) == [
        view.header, view.progress, view.warnings, view.requests, view.visits, view.kids, view.output, view.error
    ]
    assert view.warnings.value == ""  # a mock run that did all it was asked tells nothing
    assert view.requests.children == ()  # nothing was asked
    assert view.kids.children == ()  # this run started no other run


def test_events_read_as_sentences_with_call_outs() -> None:
    from lev_nb.engine import events as ev

    run = mock_run()  # a healthy dry run: no gate blocks or nudges of its own
    state = widget_module.follow(run, new_state(run))
    read = runview.visit_html(state, 0)
    assert "class='lev-callout" not in runview.snapshot_html(state)
    # A stage that keeps its gate shut, then is forced through, and a stage nudged three times:
    told = runview.RunState("r2", ["read", "check"])
    events = [ev.StageEntered("r2", "read", visit=1, from_stage=None)]
    events += [ev.GateBlocked("r2", "read", target="check", message="Write the labels first.", attempt=n, max_attempts=3)
               for n in (1, 2, 3)]
    events += [ev.GateForced("r2", "read", target="check", message="Write the labels first."),
               ev.StageEntered("r2", "check", visit=1, from_stage="read")]
    events += [ev.Nudge("r2", "check", reason="text_only", text="Use your tools.") for _ in range(3)]
    for event in events:
        told.apply(event)
    blocked = runview.visit_html(told, 0)
    assert "lev-callout gate" in blocked and "attempts 1–3 of 3" in blocked
    assert "Gate forced open to check" in blocked
    nudged = runview.visit_html(told, 1)
    assert "lev-callout nudge" in nudged and "Nudged the model 3 times" in nudged
    text = runview.snapshot_html(state)
    # No dataclass reprs, no field=value dumps, no path of the machine.
    for bad in ("run_id=", "purpose=", "call_id", "ModelCall(", run.workdir):
        assert bad not in text
    # The transcript (model text, tool calls, results) is collapsed, with the calls' arguments.
    assert "<details class='lev-transcript lev-details'" in read and "Called context_" in read


def test_the_transcript_cuts_long_text_with_show_more() -> None:
    state = runview.RunState("r")
    state.apply(ev.StageEntered("r", "a", visit=1))
    long = "word " * 100
    state.apply(ev.ModelCall("r", "a", purpose="stage", provider="p", model="m", iteration=1, text=long))
    part = runview.visit_html(state, 0)
    assert "show more</summary>" in part and part.count("word") > 100


def test_the_error_is_shown_once_with_its_stage() -> None:
    run = failed_run()
    assert run.status == "error" and run.error
    state = widget_module.follow(run, new_state(run))
    page = runview.snapshot_html(state)
    assert text_of(page).count(run.error) == 1
    assert "Failed in table_after_error:" in text_of(page)
    assert text_of(page).count("invalid key") == 1  # the first stage's error, told once
    assert "lev-callout forced" in page  # the dead_end edge it was forced along
    assert "data-status='error'" in page
    assert "width:100%" not in page  # a failed run's progress is not full
    plain = runview.snapshot_text(state)
    assert plain.count(run.error) == 1


def test_a_paused_run_says_why_once_and_its_resumed_run_goes_on() -> None:
    empty = lev_nb.ScriptedModel([{"error": {"kind": "credits", "message": "credit balance too low"}}])
    run = lev_nb.load(TRIAGE).run("R-1", model=empty).wait(RUN_TIMEOUT_S)
    assert run.status == "paused"
    state = widget_module.follow(run, new_state(run))
    assert state.finished  # nothing moves until it is resumed
    page = runview.snapshot_html(state)
    assert "data-status='paused'" in page and "Paused in " in text_of(page)
    assert text_of(page).count("then `lev resume") == 1
    assert "‖ " in page and "width:100%" not in page
    assert f"paused in {run.stage}: " in runview.snapshot_text(state)
    resumed = lev_nb.resume(run.run_id, model="mock").wait(RUN_TIMEOUT_S)
    state = widget_module.follow(resumed, new_state(resumed))
    assert state.status == "complete" and state.error is None
    assert "Run resumed" in text_of(runview.snapshot_html(state))


def test_pause_resume_and_circuit_events_read_as_sentences() -> None:
    from lev_nb.explain.story import sentence

    paused = sentence(ev.Paused("r", "s", reason="paused in stage 's': out of credits", blocker="credits"))
    assert paused.text.startswith("Run paused: paused in stage 's'") and paused.callout == "warning"
    resumed = sentence(ev.Resumed("r", None, count=2, from_status="running", replayed_model_calls=3, replayed_tool_calls=1))
    assert resumed.text == "Run resumed (resume 2): 3 model turns and 1 tool result replayed from its record."
    circuit = sentence(ev.CircuitOpen("r", "s", model="anthropic/m", failures=3, cooldown_s=300))
    assert circuit.text == "anthropic/m failed 3 times in a row; calls to it fail fast for 300 s."


# -- honest progress ----------------------------------------------------------------------------
def test_progress_is_never_full_before_the_run_completes() -> None:
    run = mock_run()
    events = run.events.snapshot()
    state = new_state(run)
    seen = []
    for event in events:
        state.apply(event)
        seen.append(state.progress())
    assert all(p < 1 for p in seen[:-1]) and seen[-1] == 1
    # It moves along the graph: each stage entered against the fewest stages still to go.
    steps = [p for i, p in enumerate(seen) if i == 0 or p != seen[i - 1]]
    assert steps == [0.0, 0.25, 0.5, 0.75, 1.0]
    # Without the blueprint it still never claims to be done.
    bare = runview.RunState(run.run_id)
    for event in events[:-1]:
        bare.apply(event)
    assert 0 < bare.progress() < 1


def test_stages_come_from_the_blueprint_even_for_a_run_loaded_elsewhere() -> None:
    run = mock_run()
    assert new_state(run).stages == lev_nb.load(TRIAGE).stage_names

    class WithBlueprint:  # a handle that offers its blueprint (what the engine may add)
        def __init__(self) -> None:
            self.run_id, self.blueprint = "x", lev_nb.load(ROOT / "blueprints" / "code-fixer")

    assert new_state(WithBlueprint()).stages == WithBlueprint().blueprint.stage_names
    text_bp = lev_nb.load((TRIAGE / "agent.leviath").read_text(encoding="utf-8"))
    run2 = text_bp.run("R-1", model="mock").wait(RUN_TIMEOUT_S)
    state = widget_module.follow(run2, new_state(run2))
    assert state.stages == text_bp.stage_names  # the run keeps the blueprint it was started from


# -- throttled, thread-safe, trait-only updates -------------------------------------------------
class FakeRun:
    """A run handle over an EventLog the test fills itself."""

    def __init__(self) -> None:
        self.run_id = "fake-1"
        self.events = EventLog()
        self.meta = {"agent_path": ""}
        self.result = None

    def subscribe(self, callback: Any, replay: bool = True) -> None:
        self.events.subscribe(callback, replay=replay)


def test_a_fast_run_is_drawn_throttled_and_its_end_at_once() -> None:
    run = FakeRun()
    view = RunWidget(run)
    draws: list[str] = []
    view.header.observe(lambda change: draws.append(change["new"]), names="value")

    def engine() -> None:
        run.events.append(ev.RunStarted("fake-1", None, agent="a", task="t", workdir="w"))
        run.events.append(ev.StageEntered("fake-1", "s", visit=1))
        for i in range(300):
            run.events.append(ev.ModelCall("fake-1", "s", purpose="stage", provider="p", model="m", iteration=i, prompt_tokens=1))
        run.events.append(ev.Completed("fake-1", "s", status="complete"))

    thread = threading.Thread(target=engine)
    thread.start()
    thread.join(30)
    assert len(draws) < 20  # 303 events, a handful of draws
    assert view.status == "complete" and "model calls</span> <b>300</b>" in view.header.value
    assert "tokens in / out</span> <b>300 / 0</b>" in view.header.value


def test_replay_and_live_events_are_folded_once_each() -> None:
    run = FakeRun()
    run.events.append(ev.RunStarted("fake-1", None, agent="a", task="t", workdir="w"))
    run.events.append(ev.StageEntered("fake-1", "s", visit=1))
    view = RunWidget(run)
    run.events.append(ev.ModelCall("fake-1", "s", purpose="stage", provider="p", model="m", iteration=1))
    run.events.append(ev.Completed("fake-1", "s", status="complete"))
    assert view.state.model_calls == 1 and view.state.seen == 4


# -- displays and the static snapshot -------------------------------------------------------------
def test_every_display_carries_an_html_and_text_snapshot() -> None:
    run = mock_run()
    view = RunWidget(run)
    bundle = view._repr_mimebundle_()
    assert {VIEW_MIME, "text/html", "text/plain"} <= set(bundle)
    assert "class='lev-run' style='" in bundle["text/html"] and "<style>" not in bundle["text/html"]
    assert bundle["text/plain"].startswith(f"triage · {run.run_id} · complete")
    assert repr(view) == f"<RunWidget {run.run_id} complete>"


def test_a_live_display_is_replaced_by_the_final_snapshot_when_the_run_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[tuple[dict[str, Any], Any]] = []
    updates: list[tuple[dict[str, Any], str]] = []

    class Handle:
        display_id = "disp-1"

    def fake_display(obj: Any, raw: bool = False, display_id: Any = None) -> Any:
        shown.append((obj, display_id))
        return Handle() if display_id else None

    monkeypatch.setattr("IPython.display.display", fake_display)
    monkeypatch.setattr("IPython.display.update_display", lambda obj, raw, display_id: updates.append((obj, display_id)))
    run = FakeRun()
    run.events.append(ev.RunStarted("fake-1", None, agent="a", task="t", workdir="w"))
    view = RunWidget(run)
    view._ipython_display_()
    ((bundle, display_id),) = shown
    assert display_id is True and VIEW_MIME in bundle and "data-status='running'" in bundle["text/html"]
    assert updates == []
    run.events.append(ev.Completed("fake-1", None, status="complete"))
    ((final, updated_id),) = updates
    assert updated_id == "disp-1"
    assert set(final) == {"text/html", "text/plain"}  # no widget left to go missing
    assert "data-status='complete'" in final["text/html"]
    # Shown again after the end: the snapshot alone, straight away.
    view._ipython_display_()
    assert set(shown[-1][0]) == {"text/html", "text/plain"} and shown[-1][1] is None


def test_the_run_handle_displays_the_snapshot() -> None:
    run = mock_run()
    bundle = run._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert bundle == snapshot_bundle(run)
    assert "Final output" in bundle["text/html"] and "dry run" in bundle["text/plain"]


@pytest.mark.parametrize(
    ("fmt", "content", "expected"),
    [
        ("json", '{"a": [1, 2]}', "<pre class='lev-pre'>{\n  &quot;a&quot;: [\n    1,"),
        ("csv", "x,y\n1,2\n", "<thead><tr><th class='lev-cell'>x</th><th class='lev-cell'>y</th></tr></thead>"),
        ("xml", "<a><b>1</b></a>", "<pre class='lev-pre'>&lt;a&gt;\n  &lt;b&gt;1&lt;/b&gt;\n&lt;/a&gt;"),
        ("text", "<script>x</script>", "<pre class='lev-pre'>&lt;script&gt;x&lt;/script&gt;</pre>"),
    ],
)
def test_the_final_output_is_drawn_by_its_format(fmt: str, content: str, expected: str) -> None:
    assert expected in runview.render_content(content, fmt)


def test_markdown_output_is_rendered_with_raw_html_escaped() -> None:
    pytest.importorskip("mistune")
    out = runview.render_content("# Title\n\n<b>x</b> and *y*", "markdown")
    assert "<h1>Title</h1>" in out and "&lt;b&gt;" in out and "<em>y</em>" in out


# -- watch and the fallback without ipywidgets -------------------------------------------------------
def test_watch_returns_the_widget_it_displays(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[Any] = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    run = mock_run()
    view = lev_nb.notebook.watch(run)
    assert isinstance(view, RunWidget) and shown == [view]


def test_watch_falls_back_to_text_without_ipywidgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(widget_module, "_widgets", None)
    run = mock_run()
    view = watch(run, display=False)
    assert isinstance(view, RunText)
    assert repr(view) == repr(run) == f"<Run {run.run_id} complete stage='table'>"
    assert view._repr_mimebundle_() == snapshot_bundle(run)
    with pytest.raises(ImportError, match="ipywidgets"):
        RunWidget(run)


def test_a_fan_outs_worker_stage_counts_as_visited() -> None:
    bp = lev_nb.load(ROOT / "blueprints" / "research-brief")
    run = bp.run("q", model="mock").wait(RUN_TIMEOUT_S)
    state = widget_module.follow(run, new_state(run))
    assert state.visited == ["scope", "split", "investigate", "synthesize", "write"]
    assert ("lev-stage visited", "✓ investigate") in chips(runview.progress_html(state))


def test_a_streaming_answer_shows_while_it_forms_and_new_events_read_as_sentences() -> None:
    from lev_nb.engine import events as ev

    state = runview.RunState("r1", ["work"])
    for event in (
        ev.RunStarted("r1", None, agent="a", task="t", workdir="w"),
        ev.StageEntered("r1", "work", visit=1, from_stage=None),
        ev.ModelText("r1", "work", text="The answer "),
        ev.ModelText("r1", "work", text="is forming"),
    ):
        state.apply(event)
    assert "The answer is forming" in runview.snapshot_html(state)
    for event in (
        ev.ModelRetry("r1", "work", provider="anthropic", model="m", attempt=1, max_attempts=4, delay_s=1.0, reason="HTTP 529 overloaded"),
        ev.ModelFallback("r1", "work", from_model="anthropic/a", to_model="anthropic/b", reason="unknown model"),
        ev.ContextEvicted("r1", "work", region="tool_results", entries=2, tokens=1500, reason="pressure"),
        ev.ModelCall("r1", "work", purpose="stage", provider="anthropic", model="m", iteration=1,
                     prompt_tokens=10, completion_tokens=5, tool_calls=0, text="The answer is formed", error=None),
    ):
        state.apply(event)
    html = runview.snapshot_html(state)
    assert "is forming" not in html  # the finished call replaced the forming text
    assert "try 2 of 4 in 1 s" in html and "Switched from anthropic/a to anthropic/b" in html
    assert "Dropped 2 entries (1,500 tokens) from tool_results" in html


def test_the_live_view_shows_what_the_run_told_in_a_call_out() -> None:
    from support import blueprint, call, say

    bp = blueprint("""
    [stages.work]
    available_tools = ["write_file"]
    nudge = { enabled = false }
    [stages.work.transitions]
    """)
    turns = [call("write_file", path="x.txt", content="x"), say("done")]
    run = bp.run("t", model=lev_nb.ScriptedModel(turns), interactive=False).wait(RUN_TIMEOUT_S)
    view = RunWidget(run)
    assert [w.code for w in run.warnings] == ["tool-denied-unattended"]
    assert "<div class='lev-warnings' role='note' style='" in view.warnings.value
    assert "data-code='tool-denied-unattended'" in view.warnings.value
    assert "lev-warnings" in view.snapshot()["text/html"]
