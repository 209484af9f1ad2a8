"""Resuming a run whose previous life talked to a person or started sub-agents (spec/runtime.md §9
the journal, §11.1, §12; issue 12 "Resume"): a person's answers (blocking tools, approvals and
their grants, checkpoints) are journaled and replayed, not asked again; a spawn_agent call never
starts a second child (one that had ended is recalled with its result, one that was still running
is reported lost); a ``waiting_input`` run whose process died is resumed and asks the same
request again, taking an answer left in its inbox meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import RUN_TIMEOUT_S, FnModel, call, events_of, fail, kinds, next_request, say

import lev_nb
from lev_nb.messages import ModelRequest, ToolResultBlock
from lev_nb.providers.base import ProviderError
from lev_nb.providers.scripted import ScriptedModel

ASKS = """
[agent]
name = "asker"
[stages.work]
available_tools = ["ask_user_text", "write_file"]
allow_blocking_tools = true
max_iterations = 10
nudge = { enabled = false }
[stages.work.transitions]
"""


def results(request: ModelRequest) -> list[str]:
    return [b.content for m in request.messages for b in m.blocks() if isinstance(b, ToolResultBlock)]


def resume(run_id: str, model: Any, **kw: Any) -> Any:
    return lev_nb.resume(run_id, model=model, **kw).wait(RUN_TIMEOUT_S)


def asked_after_resume(run: Any) -> list[str]:
    seen = kinds(run)
    return [k for k in seen[seen.index("resumed"):] if k == "interaction_requested"]


# -- a person's answers -----------------------------------------------------------------------------
def test_answers_and_a_run_wide_grant_survive_a_pause(engine, workdir: Path) -> None:
    run, _ = engine.start(ASKS, [
        call("ask_user_text", prompt="Your name?"),
        call("write_file", path="a.txt", content="one"),
        fail("credits", "the account is empty"),
    ], interactive=True)
    seen: set[str] = set()
    run.respond(next_request(run, seen).id, "Ada")
    run.respond(next_request(run, seen).id, "allow", scope="run")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "paused", run.error

    # Nobody can answer now: the journal answers for the person, and the grant still holds.
    second = ScriptedModel([call("write_file", path="b.txt", content="two"), say("done")])
    resumed = resume(run.run_id, second, interactive=False)
    assert resumed.status == "complete", resumed.error
    assert results(second.requests[0])[0] == "Ada"
    assert (workdir / "a.txt").read_text() == "one" and (workdir / "b.txt").read_text() == "two"
    assert asked_after_resume(resumed) == []
    journal = [json.loads(line) for line in (Path(run.run_dir) / "journal.jsonl").read_text().splitlines()]
    answers = [e for e in journal if e["t"] == "answer"]
    assert [(e["answer"]["outcome"], e["grant"]) for e in answers] == [("answered", None), ("answered", ["run", "write_file"])]


CHECKPOINT = """
[agent]
name = "checked"
[stages.draft]
mode = "interactive_points"
available_tools = []
max_iterations = 10
nudge = {{ enabled = false }}
[[stages.draft.interaction_points]]
name = "look"
prompt = "Good?"
style = "multiple_choice"
options = ["Approve"]
directives = {{ "Shorter" = "Make it shorter." }}
unattended = "{unattended}"
[stages.draft.transitions]
"""


def test_a_checkpoint_answer_is_not_asked_again(engine) -> None:
    run, _ = engine.start(CHECKPOINT.format(unattended="ask"), [say("a long draft"), fail("credits", "empty")],
                          interactive=True)
    run.respond(next_request(run).id, "Shorter")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "paused", run.error

    second = ScriptedModel([say("short"), say("unused")])
    resumed = lev_nb.resume(run.run_id, model=second, interactive=True)
    request = next_request(resumed)  # the checkpoint of the new draft: the first answer was replayed
    assert request.kind == "checkpoint" and request.document == "short"
    resumed.respond(request.id, "Approve")
    resumed.wait(RUN_TIMEOUT_S)
    assert resumed.status == "complete", resumed.error
    assert "directive: Make it shorter." in "\n".join(str(m.content) for m in second.requests[0].messages)
    assert len(asked_after_resume(resumed)) == 1


def test_a_checkpoint_answer_is_replayed_when_nobody_can_answer_any_more(engine) -> None:
    run, _ = engine.start(CHECKPOINT.format(unattended="auto_approve"), [say("a long draft"), fail("credits", "empty")],
                          interactive=True)
    run.respond(next_request(run).id, "Shorter")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "paused", run.error

    second = ScriptedModel([say("short")])
    resumed = resume(run.run_id, second, interactive=False)
    assert resumed.status == "complete", resumed.error
    # The person's directive, replayed: the stage ran again; its new draft passed unattended.
    assert "directive: Make it shorter." in "\n".join(str(m.content) for m in second.requests[0].messages)
    assert asked_after_resume(resumed) == []


# -- sub-agents -------------------------------------------------------------------------------------
BOSS = """
[agent]
name = "boss"
[stages.boss]
available_tools = ["spawn_agent", "check_agent", "wait_for_agent"]
max_iterations = 10
nudge = { enabled = false }
[stages.boss.transitions]
"""
HELPER = """
[agent]
name = "helper"
[stages.help]
available_tools = ["submit_output"]
nudge = { enabled = false }
[stages.help.transitions]
"""


def boss(tmp_path: Path) -> Path:
    folder = tmp_path / "boss"
    (folder / "helper").mkdir(parents=True)
    (folder / "agent.leviath").write_text(BOSS, encoding="utf-8")
    (folder / "helper" / "agent.leviath").write_text(HELPER, encoding="utf-8")
    return folder


def child_id_of(text: str) -> str:
    import re

    match = re.search(r"sub-agent '([^']+)'", text, re.IGNORECASE)
    assert match, text
    return match.group(1)


def paused_boss(tmp_path: Path, home: Path, workdir: Path, wait: bool) -> Any:
    """A boss that started a helper (which submitted its answer) and then paused for credits."""
    from lev_nb.engine.pipeline.inference import RetryPolicy

    def answer(request: ModelRequest) -> Any:
        if request.stage == "help":
            return call("submit_output", content="42") if not results(request) else say("submitted")
        seen = results(request)
        if not seen:
            return call("spawn_agent", blueprint="helper", task="find the answer", wait=wait)
        if len(seen) == 1 and not wait:
            return call("wait_for_agent", agent_id=child_id_of(seen[0]))
        raise ProviderError("credits", "the account is empty")

    run = lev_nb.run(boss(tmp_path), task="lead", model=FnModel(answer), home=home, workdir=workdir,
                     retry=RetryPolicy(max_attempts=1)).wait(RUN_TIMEOUT_S)
    assert run.status == "paused", run.error
    return run


def run_ids(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "runs").iterdir())


def test_a_resumed_parent_recalls_the_child_it_started_instead_of_starting_another(
    tmp_path: Path, home: Path, workdir: Path
) -> None:
    run = paused_boss(tmp_path, home, workdir, wait=False)
    [child] = run.meta["children"]
    before = run_ids(home)

    def answer(request: ModelRequest) -> Any:
        assert request.stage == "boss"
        return call("check_agent", agent_id=child) if len(results(request)) == 2 else say("done")

    model = FnModel(answer)
    resumed = resume(run.run_id, model)
    assert resumed.status == "complete", resumed.error
    assert run_ids(home) == before  # no second child
    last = results(model.requests[-1])
    assert last[1].startswith(f"Sub-agent '{child}' finished with status: complete") and "42" in last[1]
    assert last[2] == last[1]  # check_agent on the recalled child: its journaled result
    meta = resumed.meta
    assert meta["children"] == [child] and meta["child_runs"][0]["status"] == "complete"
    assert meta["usage"]["children"]["runs"] == 1  # what the child cost is still counted


def test_a_child_still_running_when_the_parent_died_is_reported_lost(
    tmp_path: Path, home: Path, workdir: Path
) -> None:
    run = paused_boss(tmp_path, home, workdir, wait=True)
    [child] = run.meta["children"]
    # As if the process had died while spawn_agent waited for its child: the spawn is journaled,
    # the child's end and the call's result are not.
    path = Path(run.run_dir) / "journal.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    kept = [e for e in lines if e["t"] not in ("child", "tool")]
    assert len(kept) == len(lines) - 2 and any(e["t"] == "spawn" and e["child"] == child for e in kept)
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))
    before = run_ids(home)

    model = FnModel(lambda request: say("I will redo it myself"))
    resumed = resume(run.run_id, model)
    assert resumed.status == "complete", resumed.error
    assert run_ids(home) == before  # not started again
    [lost] = results(model.requests[0])
    assert lost.startswith(f"Sub-agent '{child}' finished with status: error") and "still running when lev_nb stopped" in lost
    assert resumed.meta["child_runs"][0]["status"] == "error"


# -- a waiting run whose process died ---------------------------------------------------------------
WAITER = """
import sys
import lev_nb

run = lev_nb.load(sys.argv[1]).run("ask me", model="scripted:" + sys.argv[2], workdir=sys.argv[3], interactive=True)
run.wait()
"""


def killed_while_waiting(tmp_path: Path, home: Path, workdir: Path) -> tuple[str, dict[str, Any]]:
    folder = tmp_path / "asker"
    folder.mkdir()
    (folder / "agent.leviath").write_text(ASKS, encoding="utf-8")
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([call("ask_user_text", prompt="Your name?"), say("unused")]), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", WAITER, str(folder), str(script), str(workdir)],
                            env={**os.environ, "LEV_HOME": str(home)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            metas = list((home / "runs").glob("*/meta.json")) if (home / "runs").exists() else []
            meta = json.loads(metas[0].read_text()) if metas else {}
            if meta.get("status") == "waiting_input":
                break
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never waited"
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.communicate(timeout=RUN_TIMEOUT_S)
    return meta["run_id"], meta


def test_a_waiting_run_whose_process_died_asks_the_same_request_again(tmp_path: Path, home: Path, workdir: Path) -> None:
    run_id, meta = killed_while_waiting(tmp_path, home, workdir)
    [pending] = meta["pending"]
    second = ScriptedModel([say("hello Ada")])
    resumed = lev_nb.resume(run_id, model=second, interactive=True)
    request = next_request(resumed)
    assert request.id == pending["id"] and request.prompt == "Your name?"
    resumed.respond(request.id, "Ada")
    resumed.wait(RUN_TIMEOUT_S)
    assert resumed.status == "complete", resumed.error
    assert results(second.requests[0]) == ["Ada"]
    assert resumed.meta["resumed"]["from"] == ["waiting_input"]


def test_an_answer_left_while_no_process_ran_the_run_is_taken(tmp_path: Path, home: Path, workdir: Path) -> None:
    from lev_nb.store import RunStore

    run_id, meta = killed_while_waiting(tmp_path, home, workdir)
    [pending] = meta["pending"]
    RunStore(run_id, home=home).post_inbox({"type": "response", "request_id": pending["id"], "answer": "Grace"})
    second = ScriptedModel([say("hello Grace")])
    resumed = resume(run_id, second, interactive=True)
    assert resumed.status == "complete", resumed.error
    assert results(second.requests[0]) == ["Grace"]
    [resolved] = events_of(resumed, "interaction_resolved")[-1:]
    assert resolved.source == "inbox" and resolved.outcome == "answered"


def test_a_waiting_run_still_owned_by_a_live_process_is_refused(engine) -> None:
    from lev_nb.engine.resume import ResumeError

    run, _ = engine.start(ASKS, [call("ask_user_text", prompt="Your name?"), say("ok")], interactive=True)
    request = next_request(run)
    assert run.status == "waiting_input"
    with pytest.raises(ResumeError, match="is still running"):
        lev_nb.resume(run.run_id, model=ScriptedModel([say("x")]))
    run.respond(request.id, "Ada")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error


# -- a sub-agent that pauses ------------------------------------------------------------------------
def sub_agent_paused(tmp_path: Path, home: Path, workdir: Path, wait: bool) -> tuple[Any, str]:
    """A boss whose helper's model is out of credits: the helper pauses, and so does the boss."""
    from lev_nb.engine.pipeline.inference import RetryPolicy

    def answer(request: ModelRequest) -> Any:
        if request.stage == "help":
            raise ProviderError("credits", "the account is empty")
        seen = results(request)
        if not seen:
            return call("spawn_agent", blueprint="helper", task="find the answer", wait=wait)
        if len(seen) == 1 and not wait:
            return call("wait_for_agent", agent_id=child_id_of(seen[0]))
        return say("unreachable: the boss pauses first")

    run = lev_nb.run(boss(tmp_path), task="lead", model=FnModel(answer), home=home, workdir=workdir,
                     retry=RetryPolicy(max_attempts=1)).wait(RUN_TIMEOUT_S)
    assert run.status == "paused", run.error
    [child] = run.meta["children"]
    return run, child


@pytest.mark.parametrize("wait", [False, True])
def test_a_sub_agent_that_pauses_pauses_its_parent_and_the_resume_starts_it_again(
    tmp_path: Path, home: Path, workdir: Path, wait: bool
) -> None:
    run, child = sub_agent_paused(tmp_path, home, workdir, wait)
    setup = run.meta["needs_setup"]
    assert setup["blocker"] == "credits" and f"sub-agent '{child}'" in setup["reason"]
    assert f"lev resume {run.run_id}" in setup["reason"] and "out of credits" in setup["reason"]
    # The sub-agent's own record is closed, pointing at its parent (it is never resumed on its own).
    child_meta = json.loads((home / "runs" / child / "meta.json").read_text())
    assert child_meta["status"] == "cancelled" and f"parent run {run.run_id}" in child_meta["error"]
    assert run.meta["child_runs"][0]["status"] == "cancelled"

    def answer(request: ModelRequest) -> Any:
        if request.stage == "help":  # the account is topped up
            return call("submit_output", content="42") if not results(request) else say("submitted")
        seen = results(request)
        if len(seen) == 1 and not wait:
            return call("wait_for_agent", agent_id=child_id_of(seen[0]))
        return say("done")

    model = FnModel(answer)
    resumed = resume(run.run_id, model)
    assert resumed.status == "complete", resumed.error
    old, new = resumed.meta["children"]
    assert old == child and new != child
    boss_asked = [r for r in model.requests if r.stage == "boss"]
    result = results(boss_asked[-1])[-1]
    assert result.startswith(f"Sub-agent '{new}' finished with status: complete") and "42" in result
    statuses = {c["run_id"]: c["status"] for c in resumed.meta["child_runs"]}
    assert statuses == {old: "cancelled", new: "complete"}
    assert resumed.meta["usage"]["children"]["runs"] == 2  # the paused try still counts
    journal = [json.loads(line) for line in (Path(run.run_dir) / "journal.jsonl").read_text().splitlines()]
    assert any(e["t"] == "spawn" and e["child"] == new and e.get("replaces") == old for e in journal)


def test_resuming_a_sub_agent_names_its_parent(tmp_path: Path, home: Path, workdir: Path) -> None:
    run, child = sub_agent_paused(tmp_path, home, workdir, wait=True)
    with pytest.raises(lev_nb.ResumeError, match=f"is a sub-agent of run '{run.run_id}'") as caught:
        lev_nb.resume(child)
    assert f"lev resume {run.run_id}" in str(caught.value) and "worker" not in str(caught.value)


def test_a_sibling_stopped_when_its_parent_paused_is_started_again_too(
    tmp_path: Path, home: Path, workdir: Path
) -> None:
    import asyncio

    from lev_nb.engine.pipeline.inference import RetryPolicy

    def first(request: ModelRequest) -> Any:
        if request.stage == "help":
            if any("slow part" in m.text() for m in request.messages) or "slow part" in str(request.system):
                return asyncio.sleep(3600)  # still working when its parent pauses
            raise ProviderError("credits", "the account is empty")
        seen = results(request)
        if not seen:
            return {"tool_calls": [
                {"name": "spawn_agent", "arguments": {"blueprint": "helper", "task": "slow part"}},
                {"name": "spawn_agent", "arguments": {"blueprint": "helper", "task": "quick part"}},
            ]}
        return call("wait_for_agent", agent_id=child_id_of(seen[1]))

    run = lev_nb.run(boss(tmp_path), task="lead", model=FnModel(first), home=home, workdir=workdir,
                     retry=RetryPolicy(max_attempts=1)).wait(RUN_TIMEOUT_S)
    assert run.status == "paused", run.error
    slow, quick = run.meta["children"]
    assert f"sub-agent '{quick}'" in run.meta["needs_setup"]["reason"]

    def again(request: ModelRequest) -> Any:
        if request.stage == "help":
            return call("submit_output", content="part done") if not results(request) else say("submitted")
        seen = results(request)
        if len(seen) < 4:
            return call("wait_for_agent", agent_id=child_id_of(seen[len(seen) - 2]))
        return say("done")

    model = FnModel(again)
    resumed = resume(run.run_id, model)
    assert resumed.status == "complete", resumed.error
    boss_seen = results([r for r in model.requests if r.stage == "boss"][-1])
    assert all("finished with status: complete" in text and "part done" in text for text in boss_seen[2:])
    statuses = [c["status"] for c in resumed.meta["child_runs"]]
    assert statuses == ["cancelled", "cancelled", "complete", "complete"]
