"""The run view's request forms, driven through the widget model (no browser): an open view makes
a run ask; each kind of request is answered in place with its buttons and boxes."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import PLAN_CHECKPOINT, RUN_TIMEOUT_S, call, events_of, say

from lev_nb.notebook.requests import RequestForm
from lev_nb.notebook.widget import RunWidget
from lev_nb.providers.scripted import ScriptedModel

TOOLS = """
[stages.work]
available_tools = ["write_file", "ask_user_text", "ask_user_choice", "ask_user_confirm", "present_for_review", "edit_document"]
allow_blocking_tools = true
[stages.work.transitions]
"""


class HeldModel(ScriptedModel):
    """A scripted model whose first answer waits until the test opened the view (so the run
    cannot finish before anybody watches it)."""

    def __init__(self, turns: list[dict[str, Any]]) -> None:
        super().__init__(turns)
        self.gate = threading.Event()

    async def complete(self, request: Any) -> Any:
        await asyncio.to_thread(self.gate.wait, RUN_TIMEOUT_S)
        return await super().complete(request)


def start(engine, turns: list[dict[str, Any]], toml: str = TOOLS, **kw: Any) -> tuple[Any, RunWidget, Any]:
    """A run with the default ``interactive`` (None: it asks once a view is open), its view, and
    its model."""
    model = HeldModel(turns)
    run, _ = engine.start(toml, model, **kw)
    view = RunWidget(run)
    model.gate.set()
    return run, view, model


def form_of(view: RunWidget) -> RequestForm:
    """The view's first form, waiting for it to appear."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        forms = [f for f in view.requests.children if not f.answered]
        if forms:
            return forms[0]
        assert not view.run.done(), f"the run ended ({view.run.status}: {view.run.error}) without asking"
        time.sleep(0.01)
    raise AssertionError("no form appeared")


def results(model) -> list[str]:
    from lev_nb.messages import ToolResultBlock

    return [b.content for m in model.requests[-1].messages if m.role == "user"
            for b in m.blocks() if isinstance(b, ToolResultBlock)]


def test_an_open_view_makes_the_run_ask_and_its_buttons_answer(engine, workdir: Path):
    run, view, model = start(engine, [call("write_file", path="a.txt", content="hi"),
                                      call("write_file", path="b.txt", content="ho"), say("ok")])
    form = form_of(view)
    assert form.request.kind == "approval" and "write_file" in form.title.value
    assert "a.txt" in form.children[1].value  # the arguments
    form.allow_run.click()
    assert form.answered and all(b.disabled for b in form.buttons)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert (workdir / "a.txt").exists() and (workdir / "b.txt").exists()  # allowed for the run: asked once
    assert len(events_of(run, "interaction_requested")) == 1
    assert [e.source for e in events_of(run, "interaction_resolved")] == ["notebook"]


def test_deny_button(engine, workdir: Path):
    run, view, model = start(engine, [call("write_file", path="a.txt", content="hi"), say("ok")])
    form_of(view).deny.click()
    run.wait(RUN_TIMEOUT_S)
    assert results(model) == ["[denied] The user declined the call to 'write_file'."]


def test_without_a_view_nobody_is_asked(engine, workdir: Path):
    run, model = engine.run(TOOLS, [call("write_file", path="a.txt", content="hi"), say("ok")])
    assert results(model)[0].startswith("[denied] Tool 'write_file' needs a person's approval")


@pytest.mark.parametrize("turn, answer, expected", [
    (call("ask_user_text", prompt="Name?"), lambda f: (setattr(f.text, "value", "Ada"), f.send.click()), "Ada"),
    (call("ask_user_choice", prompt="Colour?", options=["red", "green"]), lambda f: f.choices[1].click(),
     "User chose: green"),
    (call("ask_user_confirm", prompt="Go?"), lambda f: f.no.click(), "User answered: No"),
    (call("present_for_review", title="Plan", markdown="# Plan"), lambda f: f.acknowledge.click(),
     "User reviewed the document and acknowledged."),
    (call("present_for_review", title="Plan", markdown="# Plan"),
     lambda f: (setattr(f.feedback, "value", "more tests"), f.send.click()), "User feedback: more tests"),
    (call("edit_document", content="draft"), lambda f: (setattr(f.editor, "value", "final"), f.save.click()),
     "User-edited document:\nfinal"),
    (call("edit_document", content="draft"), lambda f: f.keep.click(),
     "User made no changes. Current document:\ndraft"),
    (call("ask_user_text", prompt="Name?"), lambda f: f.decline.click(), "User declined to answer."),
])
def test_each_form_answers_in_place(engine, turn, answer, expected):
    run, view, model = start(engine, [turn, say("ok")])
    form = form_of(view)
    if form.request.kind == "edit":
        assert form.editor.value == "draft"
    answer(form)
    run.wait(RUN_TIMEOUT_S)
    assert results(model) == [expected]


def test_a_checkpoint_form(engine):
    toml = """
    [stages.plan]
    mode = "interactive_points"
    [[stages.plan.interaction_points]]
    name = "ok_plan"
    prompt = "Approve?"
    options = ["Approve"]
    abort_options = ["Stop"]
    unattended = "ask"
    [stages.plan.transitions]
    """
    run, view, _ = start(engine, [say("the plan")], toml=toml)
    form = form_of(view)
    assert form.request.kind == "checkpoint" and "the plan" in form.children[1].value
    assert [b.description for b in form.choices] == ["Approve", "Stop"]
    form.choices[1].click()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "cancelled"


def test_a_refused_answer_shows_in_the_form(engine):
    run, view, _ = start(engine, [call("ask_user_confirm", prompt="Go?"), say("ok")])
    form = form_of(view)
    form._respond("perhaps")
    assert not form.answered and "yes or no" in form.message.value
    form.yes.click()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete"


def test_the_form_goes_once_answered(engine):
    run, view, _ = start(engine, [call("ask_user_text", prompt="Name?"), call("ask_user_text", prompt="Age?"), say("ok")])
    first = form_of(view)
    first.text.value = "Ada"
    first.send.click()
    second = form_of(view)
    assert second is not first and second.request.prompt == "Age?"
    run.respond(second.request.id, "36")  # answered elsewhere: the form goes
    run.wait(RUN_TIMEOUT_S)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while view.requests.children and time.monotonic() < deadline:
        time.sleep(0.01)
    assert view.requests.children == ()


def test_the_view_says_the_run_waits_and_tells_the_answer(engine):
    from lev_nb.notebook import runview

    run, view, _ = start(engine, [call("ask_user_text", prompt="Name?"), say("ok")])
    form = form_of(view)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while view.status != "waiting_input" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "data-status='waiting_input'" in view.header.value
    # While it waits, the ASK call-out says so in the present tense.
    while "Waiting for a person: Name?" not in runview.snapshot_text(view.state) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "! ask: Waiting for a person: Name?" in runview.snapshot_text(view.state)
    form.text.value = "Ada"
    form.send.click()
    run.wait(RUN_TIMEOUT_S)
    text = runview.snapshot_text(view.state)
    # Answered, the call-out turns to the past and the answer follows it as a call-out of its own.
    assert "! ask: Asked a person: Name?\n  ! answer: Answered: Ada" in text


def test_an_approval_and_a_denied_tool_are_told_as_call_outs(engine):
    from lev_nb.notebook import runview

    run, view, _ = start(engine, [call("write_file", path="a.txt", content="hi"),
                                  call("write_file", path="b.txt", content="ho"), say("ok")])
    form_of(view).allow_run.click()
    run.wait(RUN_TIMEOUT_S)
    text = runview.snapshot_text(view.state)
    assert "! ask: Asked a person: allow the tool 'write_file'?\n  ! answer: Allowed for this run." in text

    run, view, _ = start(engine, [call("write_file", path="c.txt", content="hi"), say("ok")])
    form_of(view).deny.click()
    run.wait(RUN_TIMEOUT_S)
    lines = [line for line in runview.snapshot_text(view.state).splitlines() if line.startswith("  ! ")]
    assert lines[1] == "  ! answer: Denied."
    assert lines[2].startswith("  ! denied: write_file was denied: ")




def test_the_checkpoint_form_says_what_each_button_does(engine):
    run, view, _ = start(engine, [say("1. ship\n2. watch"), say("done")], toml=PLAN_CHECKPOINT)
    form = form_of(view)
    # Its prompt, not its internal name, and no glyph Debian's fonts lack.
    assert "Roll out this plan?" in form.title.value and "approve_plan" not in form.title.value
    assert "⏸" not in form.title.value
    said = form.children[2].value
    assert "<b>Approve</b> approves it and moves on" in said and "<b>Abandon</b> ends the run" in said
    assert "<b>Shorter</b> sends it back to the stage with that instruction" in said
    styles = {b.description: b.button_style for b in form.buttons}
    assert styles == {"Approve": "success", "Shorter": "", "Abandon": "danger", "Approve with this note": "",
                      "End the run": "danger"}
    assert all(b.layout.width == "auto" for b in form.buttons)  # long labels are not cut off
    assert form.children[-2].layout.flex_flow == "row wrap"  # and the row wraps in a narrow view
    form.choices[0].click()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error


def test_the_taint_gate_is_a_form_like_any_approval(engine, workdir: Path):
    (workdir / "notes.txt").write_text("internal notes")
    toml = ('[security]\n[stages.work]\navailable_tools = ["read_file", "shell"]\n[stages.work.transitions]\n')
    run, view, model = start(engine, [call("read_file", path="notes.txt"), call("shell", command="echo sent > out.txt"),
                                      say("ok")], toml=toml, allow=["shell", "write_file"])
    form = form_of(view)
    assert form.request.id.startswith("taint-") and "shell" in form.title.value
    assert "Taint gate" in form.title.value and "internal data" in form.title.value
    form.deny.click()
    run.wait(RUN_TIMEOUT_S)
    assert not (workdir / "out.txt").exists()
    assert results(model)[-1].startswith("[blocked]")
