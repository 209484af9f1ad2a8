"""A person in the loop (spec/runtime.md §4.1, §12): launch permissions and their precedence,
approvals answered from another thread with their grant scopes, the blocking tools answered,
declined and timed out, and messages delivered only in stages that accept them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support import RUN_TIMEOUT_S, call, events_of, next_request, request_text, say

from lev_nb.engine.interaction import InteractionError
from lev_nb.messages import ToolResultBlock

WRITE = """
[stages.work]
available_tools = ["write_file", "read_file"]
{extra}
[stages.work.transitions]
"""


def results_of(model, index: int) -> list[str]:
    """The tool results the model was shown in its ``index``-th request."""
    return [
        b.content for m in model.requests[index].messages if m.role == "user"
        for b in m.blocks() if isinstance(b, ToolResultBlock)
    ]


def write(path: str = "a.txt", content: str = "hi") -> dict:
    return call("write_file", path=path, content=content)


# -- permissions at launch ------------------------------------------------------------------------
def test_nobody_to_ask_denies_with_the_message_that_says_how_to_allow(engine, workdir: Path):
    run, model = engine.run(WRITE.format(extra=""), [write(), say("ok")])
    (result,) = results_of(model, 1)
    assert result.startswith("[denied]") and "--allow write_file" in result and "--yolo" in result
    assert not (workdir / "a.txt").exists()
    assert not run.interactive and run.meta["yolo"] is False


def test_allow_at_launch_runs_an_ask_tool_unattended(engine, workdir: Path):
    run, _ = engine.run(WRITE.format(extra=""), [write(), say("ok")], allow=["write_file"])
    assert (workdir / "a.txt").read_text() == "hi"
    assert run.meta["allowed_tools"] == ["write_file"]


def test_a_shell_line_that_writes_names_write_file_in_its_remedy(engine, workdir: Path):
    """A redirect answers to write_file's permission too: with only the shell allowed, the denial
    and the warning told the person to allow the shell, which they had. Both now name write_file,
    and doing what they say lets the line run."""
    shell = '[stages.work]\navailable_tools = ["shell"]\n[stages.work.transitions]\n'
    line = call("shell", command="echo hi >> made.txt")
    run, model = engine.run(shell, [line, say("ok")], allow=["shell"])
    (result,) = results_of(model, 1)
    assert "--allow shell --allow write_file" in result and "writes a file" in result
    (warning,) = [e.message for e in events_of(run, "warning") if "was denied" in e.message]
    assert 'start the run with --allow shell --allow write_file (allow=["shell", "write_file"] in Python)' in warning
    assert not (workdir / "made.txt").exists()
    engine.run(shell, [line, say("ok")], allow=["shell", "write_file"])
    assert (workdir / "made.txt").read_text() == "hi\n"
    run, model = engine.run(shell, [call("shell", command="touch other.txt"), say("ok")])  # no redirect
    assert "--allow shell (" in results_of(model, 1)[0] and "write_file" not in results_of(model, 1)[0]


def test_allow_at_launch_beats_a_blueprint_deny_and_the_configuration(engine, home: Path, workdir: Path):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[tool_permissions]\nwrite_file = "deny"\n', encoding="utf-8")
    extra = '[stages.work.tool_permissions]\nwrite_file = "deny"'
    run, _ = engine.run(WRITE.format(extra=extra), [write(), say("ok")], allow=["write_file"])
    assert (workdir / "a.txt").read_text() == "hi"


def test_yolo_turns_ask_into_allow_and_is_recorded(engine, workdir: Path):
    run, _ = engine.run(WRITE.format(extra=""), [write(), say("ok")], yolo=True)
    assert (workdir / "a.txt").read_text() == "hi"
    assert run.meta["yolo"] is True


def test_yolo_never_lifts_a_deny(engine, home: Path, workdir: Path):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[tool_permissions]\nwrite_file = "deny"\n', encoding="utf-8")
    run, model = engine.run(WRITE.format(extra=""), [write(), say("ok")], yolo=True)
    assert results_of(model, 1)[0] == "[denied] Tool 'write_file' is not permitted."
    assert not (workdir / "a.txt").exists()


def test_yolo_never_lifts_a_blueprint_deny(engine, workdir: Path):
    extra = '[stages.work.tool_permissions]\nwrite_file = "deny"'
    run, model = engine.run(WRITE.format(extra=extra), [write(), say("ok")], yolo=True)
    assert results_of(model, 1)[0].startswith("[denied] Tool 'write_file' is not permitted")


def test_config_allow_and_blueprint_tightening(engine, home: Path, workdir: Path):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[tool_permissions]\nwrite_file = "allow"\n', encoding="utf-8")
    run, _ = engine.run(WRITE.format(extra=""), [write(), say("ok")])
    assert (workdir / "a.txt").exists()
    extra = '[stages.work.tool_permissions]\nwrite_file = "deny"'
    run, model = engine.run(WRITE.format(extra=extra), [write("b.txt"), say("ok")])
    assert results_of(model, 1)[0].startswith("[denied]") and not (workdir / "b.txt").exists()


def test_a_blueprint_allow_counts_only_where_the_machine_honours_it(engine, blueprint_permissions, workdir: Path):
    extra = '[stages.work.tool_permissions]\nwrite_file = "allow"'
    run, _ = engine.run(WRITE.format(extra=extra), [write(), say("ok")])
    assert (workdir / "a.txt").exists()


def test_allow_names_a_tool_that_exists(engine):
    from lev_nb.engine.launch import LaunchError

    with pytest.raises(LaunchError, match="write_flie.*did you mean 'write_file'"):
        engine.start(WRITE.format(extra=""), [say("ok")], allow=["write_flie"])


def test_allow_accepts_an_alias(engine, workdir: Path):
    toml = '[stages.work]\navailable_tools = ["shell"]\n[stages.work.transitions]\n'
    # A redirect is a write: it needs write_file allowed as well as the shell.
    run, model = engine.run(toml, [call("shell", command="echo hi > s.txt"), say("ok")], allow=["bash", "write_file"])
    assert (workdir / "s.txt").exists()


# -- approvals --------------------------------------------------------------------------------------
def test_an_approval_answered_from_another_thread(engine, workdir: Path):
    run, model = engine.start(WRITE.format(extra=""), [write(), say("ok")], interactive=True)
    answered: list[str] = []

    def person() -> None:
        request = next_request(run)
        answered.append(request.kind)
        assert request.tool == "write_file" and request.arguments == {"path": "a.txt", "content": "hi"}
        assert request.id.startswith("approve-") and request.stage == "work"
        assert run.status == "waiting_input"
        assert run.meta["waiting_on"]["reason"] == "tool_approval"
        assert [p["id"] for p in run.meta["pending"]] == [request.id]
        run.respond(request.id, "allow")

    helper = threading.Thread(target=person)
    helper.start()
    helper.join(RUN_TIMEOUT_S)
    run.wait(RUN_TIMEOUT_S)
    assert answered == ["approval"]
    assert run.status == "complete" and (workdir / "a.txt").read_text() == "hi"
    assert run.meta["pending"] == [] and run.meta["waiting_on"] is None
    (resolved,) = events_of(run, "interaction_resolved")
    assert resolved.outcome == "answered" and resolved.answer == "allow (once)"
    assert [e.kind for e in run.events.snapshot()].index("interaction_requested") < [
        e.kind for e in run.events.snapshot()].index("tool_started")


def test_a_declined_approval_tells_the_model(engine, workdir: Path):
    run, model = engine.start(WRITE.format(extra=""), [write(), say("ok")], interactive=True)
    run.respond(next_request(run).id, "deny")
    run.wait(RUN_TIMEOUT_S)
    assert results_of(model, 1) == ["[denied] The user declined the call to 'write_file'."]
    assert not (workdir / "a.txt").exists()
    assert run.flags["modified_file_count"] == 0


@pytest.mark.parametrize("scope, asked", [("once", 3), ("stage", 2), ("run", 1)])
def test_grant_scopes(engine, workdir: Path, scope: str, asked: int):
    toml = """
    [stages.one]
    available_tools = ["write_file"]
    [stages.one.transitions.two]
    [stages.two]
    available_tools = ["write_file"]
    [stages.two.transitions]
    """
    turns = [write("1"), write("2"), say("next"), write("3"), say("done")]
    run, _ = engine.start(toml, turns, interactive=True)
    seen: set[str] = set()
    count = 0
    while not run.done():
        try:
            request = next_request(run, seen, timeout=RUN_TIMEOUT_S)
        except AssertionError:
            break
        count += 1
        run.respond(request.id, "allow", scope=scope)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert count == asked
    assert sorted(p.name for p in workdir.iterdir()) == ["1", "2", "3"]


def test_an_approval_nobody_answers_times_out_as_denied(engine, workdir: Path, monkeypatch):
    monkeypatch.setenv("LEV_INTERACTION_TIMEOUT_SECS", "1")
    run, model = engine.run(WRITE.format(extra=""), [write(), say("ok")], interactive=True)
    (result,) = results_of(model, 1)
    assert result.startswith("[denied] Nobody answered") and not (workdir / "a.txt").exists()
    assert events_of(run, "interaction_resolved")[0].outcome == "timed_out"


def test_answers_that_do_not_fit_are_refused_clearly(engine):
    run, _ = engine.start(WRITE.format(extra=""), [write(), say("ok")], interactive=True)
    request = next_request(run)
    with pytest.raises(InteractionError, match="answer allow or deny"):
        run.respond(request.id, "perhaps")
    with pytest.raises(InteractionError, match="scope must be one of once, stage, run"):
        run.respond(request.id, "allow", scope="forever")
    with pytest.raises(InteractionError, match="no open request 'nope'.*open requests: approve-"):
        run.respond("nope", "allow")
    run.respond(request.id, True)
    with pytest.raises(InteractionError, match="no open request"):
        run.respond(request.id, True)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete"


def test_a_programmatic_approver_still_wins(engine, workdir: Path):
    run, _ = engine.run(WRITE.format(extra=""), [write(), say("ok")], interactive=True,
                        approver=lambda name, arguments: True)
    assert (workdir / "a.txt").exists() and not events_of(run, "interaction_requested")


def test_cancelling_a_waiting_run_closes_its_request(engine):
    run, _ = engine.start(WRITE.format(extra=""), [write(), say("ok")], interactive=True)
    next_request(run)
    run.cancel()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "cancelled" and run.pending == []
    assert events_of(run, "interaction_resolved")[0].outcome == "cancelled"


# -- the blocking tools -----------------------------------------------------------------------------
ASKS = """
[stages.work]
available_tools = ["ask_user_text", "ask_user_choice", "ask_user_confirm", "present_for_review", "edit_document"]
allow_blocking_tools = true
{extra}
[stages.work.transitions]
"""

TOOL_CALLS = {
    "text": call("ask_user_text", prompt="Your name?"),
    "choice": call("ask_user_choice", prompt="Colour?", options=["red", "green"]),
    "confirm": call("ask_user_confirm", prompt="Go on?"),
    "review": call("present_for_review", title="Plan", markdown="# Plan\n1. do it"),
    "edit": call("edit_document", content="draft one", prompt="Fix it"),
}


@pytest.mark.parametrize("kind, answer, kwargs, expected", [
    ("text", "Ada", {}, "Ada"),
    ("choice", None, {"choice": 1}, "User chose: green"),
    ("choice", "red", {}, "User chose: red"),
    ("confirm", True, {}, "User answered: Yes"),
    ("confirm", "no", {}, "User answered: No"),
    ("review", None, {}, "User reviewed the document and acknowledged."),
    ("review", "Add tests", {}, "User feedback: Add tests"),
    ("edit", "draft two", {}, "User-edited document:\ndraft two"),
    ("edit", "draft one", {}, "User made no changes. Current document:\ndraft one"),
])
def test_each_blocking_tool_answered(engine, kind, answer, kwargs, expected):
    run, model = engine.start(ASKS.format(extra=""), [TOOL_CALLS[kind], say("ok")], interactive=True)
    request = next_request(run)
    assert request.kind == kind
    if kind == "choice":
        assert request.options == ("red", "green")
    if kind in ("review", "edit"):
        assert request.document in ("# Plan\n1. do it", "draft one")
    run.respond(request.id, answer, **kwargs)
    run.wait(RUN_TIMEOUT_S)
    assert results_of(model, 1) == [expected]


@pytest.mark.parametrize("kind", sorted(TOOL_CALLS))
def test_each_blocking_tool_declined(engine, kind):
    run, model = engine.start(ASKS.format(extra=""), [TOOL_CALLS[kind], say("ok")], interactive=True)
    run.respond(next_request(run).id, decline=True)
    run.wait(RUN_TIMEOUT_S)
    assert results_of(model, 1) == ["User declined to answer."]
    assert events_of(run, "interaction_resolved")[0].outcome == "declined"


@pytest.mark.parametrize("kind", sorted(TOOL_CALLS))
def test_each_blocking_tool_timed_out(engine, kind, monkeypatch):
    monkeypatch.setenv("LEV_INTERACTION_TIMEOUT_SECS", "1")
    run, model = engine.run(ASKS.format(extra=""), [TOOL_CALLS[kind], say("ok")], interactive=True)
    expected = "User made no changes. Current document:\ndraft one" if kind == "edit" else "User provided no answer."
    assert results_of(model, 1) == [expected]
    assert events_of(run, "interaction_resolved")[0].outcome == "timed_out"


def test_a_choice_needs_two_options_and_a_fitting_answer(engine):
    turns = [call("ask_user_choice", prompt="?", options=["only"]), TOOL_CALLS["choice"], say("ok")]
    run, model = engine.start(ASKS.format(extra=""), turns, interactive=True)
    request = next_request(run)
    with pytest.raises(InteractionError, match="pick one of: 0: red, 1: green"):
        run.respond(request.id, "blue")
    with pytest.raises(InteractionError, match="out of range"):
        run.respond(request.id, choice=5)
    run.respond(request.id, choice=0)
    run.wait(RUN_TIMEOUT_S)
    assert results_of(model, 1) == ["[error] ask_user_choice requires at least 2 options"]


def test_blocking_tools_are_not_offered_when_nobody_can_answer(engine):
    run, model = engine.run(ASKS.format(extra=""), [say("ok")])
    assert [t.name for t in model.requests[0].tools] == []


def test_yolo_leaves_out_blocking_tools_unless_required(engine):
    extra = 'required_tools = ["ask_user_text"]'
    run, model = engine.run(ASKS.format(extra=extra), [say("ok")], interactive=True, yolo=True)
    assert [t.name for t in model.requests[0].tools] == ["ask_user_text"]
    run, model = engine.run(ASKS.format(extra=""), [say("ok")], interactive=True)
    assert len(model.requests[0].tools) == 5


def test_a_required_blocking_tool_with_nobody_to_ask_gets_no_answer(engine):
    extra = 'required_tools = ["ask_user_text"]'
    run, model = engine.run(ASKS.format(extra=extra), [TOOL_CALLS["text"], say("ok")])
    assert results_of(model, 1) == ["User provided no answer."]
    assert any("nobody to ask" in e.message for e in events_of(run, "warning"))


# -- messages ---------------------------------------------------------------------------------------
TWO_STAGES = """
[stages.quiet]
available_tools = ["ask_user_confirm"]
accepts_messages = false
[stages.quiet.transitions.open]
[stages.open]
available_tools = ["ask_user_confirm"]
[stages.open.transitions]
"""


def test_a_message_waits_for_a_stage_that_accepts_messages(engine):
    turns = [call("ask_user_confirm", prompt="ready?"), say("quiet done"),
             call("ask_user_confirm", prompt="again?"), say("open done")]
    run, model = engine.start(TWO_STAGES, turns, interactive=True)
    first = next_request(run)
    run.send("use tabs, not spaces")
    run.respond(first.id, True)
    second = next_request(run)
    assert second.stage == "open"
    run.respond(second.id, True)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    texts = [request_text(r) for r in model.requests]
    assert not any("use tabs" in t for t in texts[:2])  # never in the stage that refuses messages
    assert "use tabs, not spaces" in texts[2]
    statuses = [(e.status, e.stage) for e in events_of(run, "message")]
    assert statuses == [("queued", "quiet"), ("delivered", "open")]


def test_a_message_reaches_the_model_as_a_user_turn(engine):
    run, model = engine.start(ASKS.format(extra=""), [TOOL_CALLS["confirm"], say("ok")], interactive=True)
    request = next_request(run)
    run.send("also mention the risks")
    run.respond(request.id, True)
    run.wait(RUN_TIMEOUT_S)
    last = model.requests[1].messages[-1]
    assert last.role == "user" and "also mention the risks" in request_text(model.requests[1])
    assert [e.status for e in events_of(run, "message")] == ["delivered"]


def test_a_message_to_an_ended_run_is_refused(engine):
    run, _ = engine.run(ASKS.format(extra=""), [say("ok")])
    with pytest.raises(InteractionError, match="has ended"):
        run.send("hello?")


# -- the inbox (what lev msg / lev respond leave) -----------------------------------------------------
def test_the_inbox_carries_answers_and_messages(engine):
    from lev_nb.store import RunStore

    run, model = engine.start(ASKS.format(extra=""), [TOOL_CALLS["text"], say("ok")], interactive=True)
    request = next_request(run)
    store = RunStore(run.run_id, home=engine.home)
    store.post_inbox({"type": "message", "text": "from elsewhere"})
    store.post_inbox({"type": "response", "request_id": "nope", "answer": "x"})
    store.post_inbox({"type": "response", "request_id": request.id, "answer": "Grace"})
    run.wait(RUN_TIMEOUT_S)
    assert results_of(model, 1) == ["Grace"]
    assert "from elsewhere" in request_text(model.requests[1])
    assert events_of(run, "interaction_resolved")[0].source == "inbox"
    assert any("no open request 'nope'" in e.message for e in events_of(run, "warning"))
    assert not list((Path(run.run_dir) / "inbox").iterdir())


# -- child runs -----------------------------------------------------------------------------------
FAN = """
[stages.split]
mode = "fan_out"
worker_stage = "worker"
nudge = { enabled = false }
[stages.split.transitions]
[stages.worker]
allow_as_worker = true
available_tools = ["write_file"]
[stages.worker.transitions]
"""


def fan_turns() -> dict:
    return {"split": [call("fan_out", items=[{"id": "a", "context": {}}]), say("merged")],
            "worker": [write("w.txt"), say("done")]}


def child_meta(run) -> dict:
    import json

    (child,) = run.meta["children"]
    return json.loads((Path(run.run_dir).parent / child / "meta.json").read_text())


def test_a_child_run_inherits_yolo_and_allow(engine, workdir: Path):
    run, _ = engine.run(FAN, fan_turns(), yolo=True, allow=["read_file"])
    assert run.status == "complete", run.error
    assert (workdir / "w.txt").exists()
    meta = child_meta(run)
    assert meta["yolo"] is True and meta["allowed_tools"] == ["read_file"]


def test_a_child_asks_whoever_its_root_asks(engine, workdir: Path):
    run, _ = engine.start(FAN, fan_turns(), interactive=True)
    request = next_request(run)
    assert request.kind == "approval" and request.run_id != run.run_id and request.stage == "worker"
    assert run.status == "waiting_input"
    run.respond(request.id, "allow")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert (workdir / "w.txt").exists()


def test_a_message_no_stage_accepts_is_reported_when_the_run_ends(engine):
    toml = TWO_STAGES.replace("[stages.open]\n", "[stages.open]\naccepts_messages = false\nnudge = { enabled = false }\n")
    turns = [call("ask_user_confirm", prompt="ready?"), say("quiet done"), say("open done")]
    run, model = engine.start(toml, turns, interactive=True)
    request = next_request(run)
    run.send("nobody will read this")
    run.respond(request.id, True)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert not any("nobody will read this" in request_text(r) for r in model.requests)
    assert any("1 message never reached the model" in e.message for e in events_of(run, "warning"))
