"""RunState.warn, the one door for what a run must tell (lev_nb.engine.run_warnings): each kind of
silent change is a warning with its code in meta.json ``warnings`` and ``run.warnings``, told once,
and the run view shows it as a call-out (the stage's own event line is not repeated)."""

from __future__ import annotations

import json
from typing import Any

from support import FnModel, call, calls, events_of, say

from lev_nb.engine.run_warnings import WARNING_CODES
from lev_nb.notebook import runview
from lev_nb.notebook.widget import new_state, follow

GATED = """
[stages.work]
available_tools = ["write_file", "list_dir"]
[stages.work.transitions.review]
hint = "ready"
gate = { require_modifications = true, max_attempts = 2 }
[stages.review]
nudge = { enabled = false }
[stages.review.transitions]
"""


def codes(run: Any) -> list[str]:
    return [w.code for w in run.warnings]


def test_a_forced_gate_is_told_once_and_the_view_does_not_repeat_it(engine: Any) -> None:
    run, _ = engine.run(GATED, [call("list_dir"), say("d1"), say("d2"), say("d3"), say("r")])
    assert run.status == "complete", run.error
    assert codes(run) == ["gate-forced"]
    assert run.warnings[0].message.startswith("the gate to 'review' ran out of attempts and let the run through anyway")
    state = follow(run, new_state(run))
    assert [w.code for w in state.warnings] == ["gate-forced"]
    lines = [line.callout for visit in state.visits for line, _ in visit.lines]
    assert lines.count("gate") == 2 and "warning" not in lines  # blocked (twice, one line), forced; told above
    assert "data-code='gate-forced'" in runview.warnings_html(state)


def test_nudges_that_run_out_are_told(engine: Any) -> None:
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    nudge = { max = 2 }
    [stages.work.transitions]
    """
    run, _ = engine.run(toml, [say("a"), say("b"), say("c")])
    assert len(events_of(run, "nudge")) == 2
    assert codes(run) == ["nudges-exhausted"]
    assert "after 2 times nudged" in run.warnings[0].message


def test_a_seed_that_fails_is_told_before_any_stage(engine: Any) -> None:
    toml = """
    [context.regions.facts]
    kind = "pinned"
    max_tokens = 500
    seed = { command = "echo half; echo broken >&2; exit 3" }
    [stages.work]
    nudge = { enabled = false }
    [stages.work.transitions]
    """
    run, _ = engine.run(toml, [say("ok")])
    assert run.status == "complete", run.error
    [warning] = run.warnings
    assert (warning.code, warning.stage) == ("seed-failed", None)
    assert warning.message == ("the seed of region 'facts' ran a command that exited with 3: "
                               "echo half; echo broken >&2; exit 3: broken")
    state = follow(run, new_state(run))  # the view tells it above the stages, in no stage visit
    assert [v.stage for v in state.visits] == ["work"] and [w.code for w in state.warnings] == ["seed-failed"]


def test_the_record_keeps_what_was_told_and_every_code_is_documented(engine: Any, home: Any) -> None:
    run, _ = engine.run(GATED, [call("list_dir"), say("d1"), say("d2"), say("d3"), say("r")])
    meta = json.loads((home / "runs" / run.run_id / "meta.json").read_text())
    assert meta["warnings"] == [w.to_dict() for w in run.warnings]
    import lev_nb.engine.run_warnings as module

    for code in WARNING_CODES:  # the module docstring documents each code
        assert f"``{code}``" in (module.__doc__ or "")


def test_a_repeated_warning_is_told_once(engine: Any) -> None:
    run, _ = engine.start(GATED, [say("x")] * 10)
    run.wait(30)
    state = run._runner.state
    for _ in range(3):
        state.warn("the same thing", "warning")
    assert [w.message for w in run.warnings].count("the same thing") == 1
    assert [e.message for e in events_of(run, "warning")].count("the same thing") == 1


FAN_OUT = """
[context.regions.results]
kind = "pinned"
max_tokens = 4000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
[stages.split]
mode = "fan_out"
worker_stage = "worker"
merge_stage = "merge"
results_region = "results"
[stages.split.transitions.merge]
hint = "merge"
[stages.worker]
allow_as_worker = true
available_tools = ["write_file", "submit_output"]
require_output = true
nudge = { enabled = false }
[stages.worker.transitions]
[stages.merge]
nudge = { enabled = false }
[stages.merge.transitions]
"""


def test_what_workers_were_told_reaches_the_parent_once(engine: Any) -> None:
    from lev_nb.messages import ToolResultBlock

    def answer(request: Any) -> Any:  # each worker: write (denied) and submit in one batch, then stop
        answered = any(isinstance(b, ToolResultBlock) for m in request.messages for b in m.blocks())
        if request.stage == "split" and not answered:
            return call("fan_out", items=[{"id": "a", "context": {}}, {"id": "b", "context": {}}])
        if request.stage == "worker" and not answered:
            return calls(("write_file", {"path": "x.txt", "content": "x"}), ("submit_output", {"content": "done"}))
        return say("ok")

    run, _ = engine.run(FAN_OUT, FnModel(answer), interactive=False)
    assert run.status == "complete", run.error
    for child in run.children:
        assert [w.code for w in child.warnings] == ["tool-denied-unattended"]
    [told] = run.warnings
    assert told.code == "tool-denied-unattended" and told.stage == "split"
    assert told.message.startswith("a fan-out worker: 'write_file' was denied")


def test_a_warning_never_shows_a_secret(engine: Any, home: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key-42")
    run, _ = engine.start(GATED, [say("x")] * 10)
    run.wait(30)
    run._runner.state.warn("the server said: bad key sk-ant-not-a-real-key-42", "model-fallback")
    assert run.warnings[-1].message == "the server said: bad key [redacted]"
    assert "sk-ant-not-a-real-key-42" not in (home / "runs" / run.run_id / "meta.json").read_text()


def test_a_value_of_the_wrong_type_is_told_before_any_stage_with_its_line(engine: Any) -> None:
    toml = """
    [stages.work]
    max_iterations = "two"
    nudge = { enabled = false }
    [stages.work.transitions]
    """
    run, _ = engine.run(toml, [say("done")])
    assert run.status == "complete", run.error
    [told] = [w for w in run.warnings if w.code == "wrong-type"]
    assert told.stage is None
    assert told.message.startswith("stages.work.max_iterations (line ")
    assert "is a string, but it takes a whole number, so the value is ignored" in told.message
