"""Interaction points in an unattended run: auto_approve passes, ask ends the run in error."""

from __future__ import annotations

from pathlib import Path

import lev_nb
from lev_nb.providers import ScriptedModel


POINTS = """
[agent]
name = "points"
[stages.plan]
mode = "interactive_points"
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
max_iterations = 3
[[stages.plan.interaction_points]]
name = "approve_plan"
prompt = "Approve the plan?"
unattended = "{unattended}"
[stages.plan.transitions]
"""


def test_auto_approve_checkpoint_passes_unattended(tmp_path: Path) -> None:
    bp = lev_nb.load(POINTS.format(unattended="auto_approve"))
    r = bp.run("t", model=ScriptedModel([{"text": "the plan"}]), home=tmp_path).wait(30)
    assert r.status == "complete"
    assert any("approve_plan" in e.message for e in r.events if e.kind == "warning")


def test_ask_checkpoint_ends_an_unattended_run_in_error(tmp_path: Path) -> None:
    bp = lev_nb.load(POINTS.format(unattended="ask"))
    r = bp.run("t", model=ScriptedModel([{"text": "the plan"}]), home=tmp_path).wait(30)
    assert r.status == "error" and "approve_plan" in r.error and "auto_approve" in r.error


# -- with a person to ask (spec/runtime.md §12.3) ----------------------------------------------------
import pytest  # noqa: E402
from support import RUN_TIMEOUT_S, events_of, next_request, request_text, say  # noqa: E402

REVIEWED = """
[agent]
name = "points"
[context.regions]
plan_doc = {{ kind = "pinned", budget = 500 }}
[stages.plan]
mode = "interactive_points"
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
max_iterations = 6
[[stages.plan.interaction_points]]
name = "approve_plan"
prompt = "Approve the plan?"
style = "multiple_choice"
options = ["Approve"]
abort_options = ["Abandon"]
edit_options = ["Edit it myself"]
directives = {{ "Shorter" = "Cut the plan to three steps." }}
document_region = "plan_doc"
unattended = "{unattended}"
{more}
[stages.plan.transitions]
"""


def start_points(engine, turns, unattended="ask", more="", **kw):
    return engine.start(REVIEWED.format(unattended=unattended, more=more), turns, interactive=True, **kw)


def test_a_checkpoint_approved_by_its_option(engine):
    run, model = start_points(engine, [say("the plan: 1, 2, 3, 4")])
    request = next_request(run)
    assert request.kind == "checkpoint" and request.point == "approve_plan"
    assert request.id == f"{run.run_id}-point-approve_plan-0"
    assert request.options == ("Approve", "Shorter", "Edit it myself", "Abandon")
    assert request.document == "the plan: 1, 2, 3, 4"
    assert run.meta["waiting_on"]["reason"] == "interaction_point"
    run.respond(request.id, choice=0)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert len(model.requests) == 1  # approving costs no model call


def test_a_directive_runs_the_stage_again_then_the_point_comes_back(engine):
    run, model = start_points(engine, [say("long plan"), say("short plan")])
    first = next_request(run)
    run.respond(first.id, "shorter")  # matched loosely (case, spacing)
    second = next_request(run, {first.id})
    assert second.id.endswith("-1") and second.document == "short plan"
    assert "User [approve_plan] directive: Cut the plan to three steps." in request_text(model.requests[1])
    run.respond(second.id, "Approve")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert len(model.requests) == 2


def test_an_edit_option_asks_for_the_text_and_presents_it_again(engine):
    run, model = start_points(engine, [say("draft plan"), say("unused")])
    seen: set[str] = set()
    run.respond(next_request(run, seen).id, "Edit it myself")
    edit = next_request(run, seen)
    assert edit.kind == "edit" and edit.id.endswith("-edit") and edit.document == "draft plan"
    run.respond(edit.id, "my own plan")
    again = next_request(run, seen)
    assert again.kind == "checkpoint" and again.document == "my own plan"
    run.respond(again.id, "Approve")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert len(model.requests) == 1  # an edit is presented again without a model call
    region = run._runner.state.ctx.region("plan_doc")
    assert region.entries[-1].content == "[revised by user - keep these changes]\nmy own plan"


def test_an_abort_option_cancels_the_run(engine):
    run, _ = start_points(engine, [say("plan")])
    run.respond(next_request(run).id, "Abandon")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "cancelled"
    assert any("Abandon" in e.message for e in events_of(run, "warning"))


def test_free_text_approves_and_is_told_to_the_model(engine):
    more = '[stages.plan.transitions.next]\n[stages.next]\nmodel = { provider = "anthropic", model = "m" }\nnudge = { enabled = false }\n[stages.next.transitions]'
    toml = REVIEWED.format(unattended="ask", more="").replace("[stages.plan.transitions]\n", more + "\n")
    run, model = engine.start(toml, [say("plan"), say("done")], interactive=True)
    run.respond(next_request(run).id, "looks good, go")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert "User [approve_plan] looks good, go" in request_text(model.requests[-1])


def test_an_ask_point_nobody_answers_stops_the_run(engine, monkeypatch):
    monkeypatch.setenv("LEV_INTERACTION_TIMEOUT_SECS", "1")
    run, _ = start_points(engine, [say("plan")])
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "error" and "went unanswered within the interaction timeout" in run.error


def test_an_auto_approve_point_nobody_answers_passes(engine, monkeypatch):
    monkeypatch.setenv("LEV_INTERACTION_TIMEOUT_SECS", "1")
    run, _ = start_points(engine, [say("plan")], unattended="auto_approve")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert events_of(run, "interaction_resolved")[0].outcome == "timed_out"


def test_under_yolo_an_auto_approve_point_passes_without_asking(engine):
    run, _ = start_points(engine, [say("plan")], unattended="auto_approve", yolo=True)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete" and not events_of(run, "interaction_requested")


@pytest.mark.parametrize("answer, value", [(True, "Yes"), ("no", "No")])
def test_a_confirm_point(engine, answer, value):
    toml = POINTS.format(unattended="ask").replace('prompt = "Approve the plan?"', 'prompt = "OK?"\nstyle = "confirm"')
    bp = lev_nb.load(toml)
    run = bp.run("t", model=ScriptedModel([say("plan")]), home=engine.home, interactive=True)
    request = next_request(run)
    assert request.options == ("Yes", "No")
    run.respond(request.id, answer)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete"
    assert events_of(run, "interaction_resolved")[0].answer == value
