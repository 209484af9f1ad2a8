"""Agents that start agents (spec/runtime.md §11.1, §5.1.1): spawn_agent by path and by name,
check/wait/send/kill, depth limits from each source, requires_children, cancellation cascades,
the links in both records, usage rolled up, and a large fan-out reported correctly."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from support import RUN_TIMEOUT_S, FnModel, call, events_of, say

from lev_nb.messages import ModelRequest, ToolResultBlock
from lev_nb.messages import request_text as flatten


def results(request: ModelRequest) -> list[str]:
    """The tool results the request shows, oldest first."""
    return [b.content for m in request.messages for b in m.blocks() if isinstance(b, ToolResultBlock)]


def called(request: ModelRequest, tool: str) -> bool:
    """Whether the request's history shows a call of ``tool``."""
    from lev_nb.messages import ToolUseBlock

    return any(isinstance(b, ToolUseBlock) and b.name == tool for m in request.messages for b in m.blocks())


def spawned_id(text: str) -> str:
    match = re.search(r"sub-agent '([^']+)'", text, re.IGNORECASE)
    assert match, text
    return match.group(1)


def meta_of(home: Path, run_id: str) -> dict[str, Any]:
    return json.loads((home / "runs" / run_id / "meta.json").read_text())


def all_metas(home: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (home / "runs").glob("*/meta.json")]


BOSS = """
[agent]
name = "boss"
{agent_extra}
[stages.boss]
available_tools = ["spawn_agent", "check_agent", "wait_for_agent", "send_to_agent", "kill_agent"]
nudge = {{ enabled = false }}
{stage_extra}
[stages.boss.transitions]
"""

HELPER = """
[agent]
name = "helper"
{agent_extra}
[stages.help]
available_tools = ["submit_output", "list_dir", "spawn_agent"]
nudge = {{ enabled = false }}
{stage_extra}
[stages.help.transitions]
"""


def write_agent(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.leviath").write_text(text, encoding="utf-8")
    return folder


def boss_folder(tmp_path: Path, agent_extra: str = "", stage_extra: str = "", helper_extra: str = "") -> Path:
    folder = write_agent(tmp_path / "boss", BOSS.format(agent_extra=agent_extra, stage_extra=stage_extra))
    write_agent(folder / "helper", HELPER.format(agent_extra="", stage_extra=helper_extra))
    return folder


def start(folder: Path | str, model: Any, home: Path, workdir: Path, **kw: Any) -> Any:
    import lev_nb
    from lev_nb.engine.pipeline.inference import RetryPolicy

    return lev_nb.run(folder, task=kw.pop("task", "lead the work"), model=model, home=home, workdir=workdir,
                      retry=RetryPolicy(max_attempts=1), **kw)


# -- spawning -------------------------------------------------------------------------------------
def test_spawn_by_path_then_wait_links_both_records_and_rolls_up_usage(tmp_path, home, workdir):
    folder = boss_folder(tmp_path)

    def answer(request):
        if request.stage == "boss":
            seen = results(request)
            if not seen:
                return call("spawn_agent", blueprint="helper/agent.leviath", task="count the files",
                            output_format="json", output_instructions="an object with a count")
            if len(seen) == 1:
                return call("wait_for_agent", agent_id=spawned_id(seen[0]))
            return say("all done")
        if not results(request):
            return call("submit_output", content='{"count": 3}')
        return say("submitted")

    model = FnModel(answer)
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    [child_id] = run.meta["children"]
    boss_results = results([r for r in model.requests if r.stage == "boss"][-1])
    assert boss_results[0].startswith(f"Spawned sub-agent '{child_id}' (helper)")
    assert boss_results[1].startswith(f"Sub-agent '{child_id}' finished with status: complete")
    assert '--- its final output (json) ---\n{"count": 3}' in boss_results[1]
    # The output request reached the child: its submit_output tool asks for JSON with the instructions.
    child_request = [r for r in model.requests if r.stage == "help"][0]
    submit = next(t for t in child_request.tools if t.name == "submit_output")
    assert "json" in submit.description.lower() and "an object with a count" in submit.description
    # Both records carry the link.
    parent = meta_of(home, run.run_id)
    assert parent["child_runs"] == [{
        "run_id": child_id, "kind": "agent", "agent_name": "helper",
        "blueprint": str((folder / "helper" / "agent.leviath").resolve()), "status": "complete", "error": None,
    }]
    child = meta_of(home, child_id)
    assert (child["parent_run_id"], child["depth"], child["status"]) == (run.run_id, 1, "complete")
    assert child["output_request"] == {"format": "json", "instructions": "an object with a count"}
    # The child's calls are rolled into the parent's usage, and shown apart as children.
    assert parent["usage"]["total"]["calls"] == 3 + child["usage"]["total"]["calls"]
    assert parent["usage"]["children"]["runs"] == 1
    assert parent["usage"]["children"]["calls"] == child["usage"]["total"]["calls"] == 2
    # run.children: live handles.
    [handle] = run.children
    assert handle.run_id == child_id and handle.status == "complete" and handle.parent_run_id == run.run_id
    assert handle.result.content == '{"count": 3}'
    assert handle.wait(1) is handle and handle.done()
    assert [e.child_id for e in events_of(run, "child_started")] == [child_id]
    assert [(e.child_id, e.status) for e in events_of(run, "child_ended")] == [(child_id, "complete")]


def test_spawn_by_bundled_name_with_wait_true(tmp_path, home, workdir):
    from lev_nb.blueprint.bundled import bundled_agent
    from lev_nb.providers.mock import MockModel

    folder = boss_folder(tmp_path)
    mock = MockModel()

    def answer(request):
        if request.stage != "boss":
            return mock.complete(request)  # the bundled agent's stages: the offline dry run
        if not results(request):
            return call("spawn_agent", blueprint="triage", task="1. The app crashes on start", wait=True)
        return say("done")

    model = FnModel(answer)
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    [child_id] = run.meta["children"]
    child = meta_of(home, child_id)
    assert child["agent_name"] == "triage" and child["status"] == "complete"
    assert Path(child["agent_path"]) == bundled_agent("triage")
    last = results([r for r in model.requests if r.stage == "boss"][-1])[0]
    assert last.startswith(f"Sub-agent '{child_id}' finished with status: complete")
    assert "--- its final output (csv) ---" in last


@pytest.mark.parametrize(
    ("blueprint", "expected"),
    [
        ("../elsewhere", "outside this agent's folder"),
        ("..", "outside this agent's folder"),
        ("/etc/passwd", "outside this agent's folder"),
        ("agents/nothing-here", "there is no agent at"),
        ("no-such-agent", "no agent named 'no-such-agent'"),
        ("work/evil", "inside the run's working directory"),
    ],
)
def test_spawn_refusals_are_tool_errors(tmp_path, home, blueprint, expected):
    folder = boss_folder(tmp_path)
    workdir = folder / "work"  # a workdir inside the agent folder: what the model writes there is not run
    write_agent(workdir / "evil", HELPER.format(agent_extra="", stage_extra=""))
    write_agent(tmp_path / "elsewhere", HELPER.format(agent_extra="", stage_extra=""))
    turns = iter([call("spawn_agent", blueprint=blueprint, task="t"), say("ok")])
    model = FnModel(lambda request: next(turns))
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    [result] = results(model.requests[-1])
    assert result.startswith("[error] spawn_agent") and expected in result, result
    assert run.meta["children"] == []


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("spawn_agent", {"blueprint": "evil", "task": "t"}),
        ("fan_out", {"agent": "evil", "items": [{"id": "x", "context": {}}]}),
    ],
)
def test_an_agent_named_by_the_model_is_never_taken_from_the_working_directory(tmp_path, home, tool, arguments):
    # A workdir that holds the agent folder (run from the project folder): an agent the model wrote
    # there was found by name beside the blueprint and run (a path to it was refused already).
    folder = boss_folder(tmp_path)
    (folder / "agent.leviath").write_text(BOSS.format(agent_extra="", stage_extra="").replace(
        '"kill_agent"]', '"kill_agent", "fan_out"]'), encoding="utf-8")
    write_agent(tmp_path / "evil", HELPER.format(agent_extra="", stage_extra=""))
    turns = iter([call(tool, **arguments), say("ok")])
    model = FnModel(lambda request: next(turns))
    run = start(folder, model, home, tmp_path).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    [result] = results(model.requests[-1])
    assert result.startswith(f"[error] {tool}") and "inside the run's working directory" in result, result
    assert run.meta["children"] == []


@pytest.mark.parametrize("name", ["/elsewhere", "../elsewhere", "..", "a\\b"])
def test_a_fan_out_agent_is_a_name_never_a_path(tmp_path, home, workdir, name):
    # fan_out's `agent` was joined to each agent folder as given: an absolute path ran any agent.leviath.
    folder = write_agent(tmp_path / "boss", BOSS.format(agent_extra="", stage_extra="").replace(
        '"kill_agent"]', '"kill_agent", "fan_out"]'))
    elsewhere = write_agent(tmp_path / "elsewhere", HELPER.format(agent_extra="", stage_extra=""))
    name = str(elsewhere) if name == "/elsewhere" else name
    turns = iter([call("fan_out", agent=name, items=[{"id": "x", "context": {}}]), say("ok")])
    model = FnModel(lambda request: next(turns))
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    [result] = results(model.requests[-1])
    assert result.startswith("[error] fan_out") and "is not an agent's name" in result, result
    assert run.meta["children"] == []


def test_spawn_needs_blueprint_and_task_and_a_child_that_can_start(tmp_path, home, workdir):
    folder = boss_folder(tmp_path)
    write_agent(folder / "picky", HELPER.format(agent_extra="", stage_extra="").replace(
        "[stages.help]", '[context.regions.topic]\nkind = "pinned"\nmax_tokens = 500\nseed = { caller = "topic", required = true }\n[stages.help]'))
    turns = iter([
        call("spawn_agent", blueprint="helper"),
        call("spawn_agent", blueprint="picky", task="t"),
        call("check_agent", agent_id="nobody"),
        say("ok"),
    ])
    model = FnModel(lambda request: next(turns))
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    first, second, third = results(model.requests[-1])
    assert first.startswith("[error] invalid arguments for 'spawn_agent'") and "task" in first
    assert second.startswith("[error] spawn_agent: the sub-agent cannot start") and "task" in second
    assert third.startswith("[error] no sub-agent 'nobody' was started by this run")


# -- depth limits ---------------------------------------------------------------------------------
RECURSIVE = """
[agent]
name = "rec"
{agent_extra}
[stages.go]
available_tools = ["spawn_agent"]
nudge = {{ enabled = false }}
[stages.go.transitions]
"""


def recursive_model(spawn_args: dict[str, Any] | None = None) -> FnModel:
    def answer(request):
        seen = results(request)
        if not seen:
            return call("spawn_agent", blueprint="rec", task="go deeper", wait=True, **(spawn_args or {}))
        return say("back up")

    return FnModel(answer)


def depth_run(tmp_path, home, workdir, agent_extra="", spawn_args=None, **kw):
    folder = write_agent(tmp_path / "rec", RECURSIVE.format(agent_extra=agent_extra))
    model = recursive_model(spawn_args)
    run = start(folder, model, home, workdir, **kw).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    metas = all_metas(home)
    assert all(m["status"] == "complete" for m in metas)
    refusals = [r for req in model.requests for r in results(req) if r.startswith("[error] sub-agent depth limit")]
    assert len(refusals) == 1, refusals
    return max(m["depth"] for m in metas), refusals[0]


def test_depth_limit_defaults_to_three(tmp_path, home, workdir):
    deepest, refusal = depth_run(tmp_path, home, workdir)
    assert deepest == 3
    assert refusal.startswith("[error] sub-agent depth limit (3) reached: this run is already 3 levels below")
    assert "[limits] max_child_depth in the configuration" in refusal


def test_depth_limit_from_the_blueprint(tmp_path, home, workdir):
    deepest, refusal = depth_run(tmp_path, home, workdir, agent_extra="max_child_depth = 1")
    assert deepest == 1
    assert "(1) reached" in refusal and "[agent] max_child_depth in the blueprint" in refusal


def test_depth_limit_from_the_launch_wins_over_the_blueprint(tmp_path, home, workdir):
    deepest, refusal = depth_run(tmp_path, home, workdir, agent_extra="max_child_depth = 1", max_depth=2)
    assert deepest == 2
    assert "(2) reached" in refusal and "--max-depth" in refusal


def test_depth_limit_from_the_configuration(tmp_path, home, workdir):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[limits]\nmax_child_depth = 0\n", encoding="utf-8")
    deepest, refusal = depth_run(tmp_path, home, workdir)
    assert deepest == 0
    assert "no sub-agents are allowed at all" in refusal and "configuration" in refusal


def test_spawn_argument_can_only_tighten_the_limit(tmp_path, home, workdir):
    deepest, refusal = depth_run(tmp_path, home, workdir, spawn_args={"max_child_depth": 1})
    assert deepest == 1
    assert "spawn_agent" in refusal
    for other in (tmp_path / "second", home / "second"):
        other.mkdir()
    deepest, _ = depth_run(tmp_path / "second", home / "second", workdir, agent_extra="max_child_depth = 1",
                           spawn_args={"max_child_depth": 5})
    assert deepest == 1


def test_a_bad_max_depth_is_refused_at_launch(tmp_path, home, workdir):
    from lev_nb.engine.launch import LaunchError

    folder = write_agent(tmp_path / "rec", RECURSIVE.format(agent_extra=""))
    with pytest.raises(LaunchError, match="max_depth must be a whole number"):
        start(folder, "mock", home, workdir, max_depth=-1)


# -- requires_children, kill, cancel ---------------------------------------------------------------
class Gate:
    """A latch the test opens; a model awaits it without blocking the engine loop."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.reached = threading.Event()

    async def wait(self) -> None:
        self.reached.set()
        await asyncio.get_running_loop().run_in_executor(None, self.opened.wait, RUN_TIMEOUT_S)


def wait_for_event(run: Any, kind: str) -> Any:
    for event in run.events:  # blocks until the next event comes
        if event.kind == kind:
            return event
    raise AssertionError(f"the run ended without a {kind} event")


def test_requires_children_holds_the_stage_until_its_sub_agents_end(tmp_path, home, workdir):
    folder = boss_folder(tmp_path, stage_extra="requires_children = true")
    gate = Gate()

    async def answer(request):
        if request.stage == "boss":
            if not results(request):
                return call("spawn_agent", blueprint="helper", task="slow work")
            return say("I am done; my helper is not")
        if not results(request):
            await gate.wait()
            return call("submit_output", content="slow answer")
        return say("submitted")

    run = start(folder, FnModel(answer), home, workdir)
    held = wait_for_event(run, "children_awaited")
    assert held.outstanding == 1
    assert run.status == "running" and run.meta["waiting_on"] == {"reason": "children", "outstanding": 1}
    assert meta_of(home, run.run_id)["waiting_on"] == {"reason": "children", "outstanding": 1}
    gate.opened.set()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    kinds = [e.kind for e in run.events.snapshot()]
    assert kinds.index("children_awaited") < kinds.index("child_ended") < kinds.index("completed")
    assert run.children[0].status == "complete"
    assert run.meta["waiting_on"] is None and run.meta["child_runs"][0]["status"] == "complete"


def test_without_requires_children_a_sub_agent_still_running_at_the_end_is_stopped(tmp_path, home, workdir):
    folder = boss_folder(tmp_path)

    async def answer(request):
        if request.stage == "boss":
            if not results(request):
                return call("spawn_agent", blueprint="helper", task="slow work")
            return say("leaving")
        await asyncio.sleep(3600)

    run = start(folder, FnModel(answer), home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    [child] = run.children
    assert child.status == "cancelled"
    assert any("was still running when this run ended" in e.message for e in events_of(run, "warning"))
    assert meta_of(home, child.run_id)["status"] == "cancelled"


def test_kill_agent_stops_a_running_child_and_its_own_children(tmp_path, home, workdir):
    folder = boss_folder(tmp_path)
    grandchild_running = Gate()

    async def answer(request):
        if request.stage == "boss":
            seen = results(request)
            if not seen:
                return call("spawn_agent", blueprint="helper", task="spawn a helper of your own")
            if len(seen) == 1:
                await asyncio.get_running_loop().run_in_executor(None, grandchild_running.reached.wait, RUN_TIMEOUT_S)
                return call("kill_agent", agent_id=spawned_id(seen[0]))
            if len(seen) == 2:
                return call("check_agent", agent_id=spawned_id(seen[0]))
            return say("done")
        if "spawn a helper of your own" in flatten(request) and not results(request):
            return call("spawn_agent", blueprint="helper", task="work forever", wait=True)
        await grandchild_running.wait()  # never opened: only a cancel ends this call
        return say("unreachable")

    model = FnModel(answer)
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    spawn, kill, check = results([r for r in model.requests if r.stage == "boss"][-1])
    child_id = spawned_id(spawn)
    assert kill == f"Sub-agent '{child_id}' was stopped (status: cancelled), with any sub-agents of its own."
    assert check.startswith(f"Sub-agent '{child_id}' finished with status: cancelled")
    child = meta_of(home, child_id)
    [grandchild_id] = child["children"]
    assert child["status"] == "cancelled"
    assert meta_of(home, grandchild_id)["status"] == "cancelled"
    assert meta_of(home, grandchild_id)["depth"] == 2
    assert run.meta["child_runs"][0]["status"] == "cancelled"
    grandchild_running.opened.set()  # free the executor thread the cancelled call left waiting


def test_cancelling_the_parent_cancels_its_sub_agents_all_the_way_down(tmp_path, home, workdir):
    folder = boss_folder(tmp_path)
    deepest = Gate()

    async def answer(request):
        if request.stage == "boss":
            return call("spawn_agent", blueprint="helper", task="level one", wait=True)
        if "level one" in flatten(request):
            return call("spawn_agent", blueprint="helper", task="level two", wait=True)
        await deepest.wait()
        return say("unreachable")

    run = start(folder, FnModel(answer), home, workdir)
    assert deepest.reached.wait(RUN_TIMEOUT_S)
    run.cancel()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "cancelled"
    metas = {m["run_id"]: m for m in all_metas(home)}
    assert len(metas) == 3
    assert {m["status"] for m in metas.values()} == {"cancelled"}
    assert sorted(m["depth"] for m in metas.values()) == [0, 1, 2]
    assert run.meta["child_runs"][0]["status"] == "cancelled"
    deepest.opened.set()


# -- messages -------------------------------------------------------------------------------------
def test_send_to_agent_reaches_a_stage_that_accepts_messages(tmp_path, home, workdir):
    helper_two_stages = HELPER.format(agent_extra="", stage_extra="accepts_messages = false").replace(
        "[stages.help.transitions]", '[stages.help.transitions.listen]\nhint = "go on"\n'
        '[stages.listen]\navailable_tools = ["submit_output"]\nnudge = { enabled = false }\n[stages.listen.transitions]')
    folder = boss_folder(tmp_path)
    write_agent(folder / "helper", helper_two_stages)
    sent = Gate()

    async def answer(request):
        if request.stage == "boss":
            seen = results(request)
            if not seen:
                return call("spawn_agent", blueprint="helper", task="listen")
            if len(seen) == 1:
                return call("send_to_agent", agent_id=spawned_id(seen[0]), message="the answer is 42")
            if len(seen) == 2:
                sent.opened.set()
                return call("wait_for_agent", agent_id=spawned_id(seen[0]))
            return say("done")
        if request.purpose != "stage":
            return say("listen")
        if request.stage == "help":
            if not results(request):
                await sent.wait()
                return call("list_dir")
            return say("moving on")
        if "the answer is 42" in flatten(request) and not called(request, "submit_output"):
            return call("submit_output", content="heard 42")
        return say("nothing heard" if not results(request) else "ok")

    model = FnModel(answer)
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    help_requests = [r for r in model.requests if r.stage == "help"]
    assert all("the answer is 42" not in flatten(r) for r in help_requests)  # help does not accept messages
    assert results([r for r in model.requests if r.stage == "boss"][-1])[2].endswith("heard 42")
    child = run.children[0]
    [delivered] = [e for e in events_of(child, "message") if e.status == "delivered"]
    assert (delivered.stage, delivered.text, delivered.source) == ("listen", "the answer is 42", "parent")


# -- fan-out at scale -----------------------------------------------------------------------------
FAN_OUT = """
[agent]
name = "wide"
[context.regions.results]
kind = "pinned"
max_tokens = 60000
[stages.split]
mode = "fan_out"
worker_stage = "worker"
merge_stage = "merge"
results_region = "results"
max_workers = 16
nudge = { enabled = false }
[stages.split.transitions.merge]
hint = "merge"
[stages.worker]
allow_as_worker = true
available_tools = ["submit_output"]
require_output = true
nudge = { enabled = false }
[stages.worker.transitions]
[stages.merge]
nudge = { enabled = false }
[stages.merge.transitions]
"""


def test_a_fan_out_of_200_items_with_16_workers_reports_every_item(engine, home):
    in_flight = {"now": 0, "most": 0}

    async def answer(request):
        if request.stage == "split":
            return call("fan_out", items=[{"id": f"i{n:03d}", "context": {"n": n}} for n in range(200)])
        if request.stage == "worker":
            item = re.search(r"Work item id: (\S+)", flatten(request)).group(1)
            if results(request):
                return say("submitted")
            in_flight["now"] += 1
            in_flight["most"] = max(in_flight["most"], in_flight["now"])
            await asyncio.sleep(0)  # let the other workers in
            in_flight["now"] -= 1
            if item.endswith("7"):
                return say("I could not do this one")  # no submit_output: a failed worker
            return call("submit_output", content=f"done {item}")
        return say("merged")

    model = FnModel(answer)
    run, _ = engine.run(FAN_OUT, model)
    assert run.status == "complete", run.error
    assert 1 < in_flight["most"] <= 16
    [finished] = events_of(run, "fan_out_finished")
    assert (finished.succeeded, finished.failed) == (180, 20)
    merge = [r for r in model.requests if r.stage == "merge"][0]
    report = next(b for b in merge.system if "[fan_out results:" in b)
    assert "[fan_out results: 180 succeeded, 20 failed]" in report
    assert report.count("## worker ") == 200 and report.count(" FAILED\n") == 20
    assert "## worker i123\ndone i123" in report and "## worker i017 FAILED" in report
    meta = run.meta
    assert len(meta["children"]) == len(set(meta["children"])) == 200
    statuses = [c["status"] for c in meta["child_runs"]]
    # A worker owing its output completes with output_forced (issue 24), and counts as failed above.
    assert statuses.count("complete") == 200
    assert {c["kind"] for c in meta["child_runs"]} == {"worker"}
    assert meta["usage"]["children"]["runs"] == 200
    assert len(run.children) == 200
    records = [meta_of(home, c) for c in meta["children"]]
    assert all(r["parent_run_id"] == run.run_id for r in records)
    assert sorted(r["status"] for r in records) == sorted(statuses)


def test_an_ended_sub_agent_cannot_be_sent_to_and_killing_it_says_so(tmp_path, home, workdir):
    folder = boss_folder(tmp_path)

    def answer(request):
        if request.stage == "boss":
            seen = results(request)
            if not seen:
                return call("spawn_agent", blueprint="helper", task="quick", wait=True)
            if len(seen) == 1:
                child = spawned_id(seen[0])
                return {"tool_calls": [{"name": "send_to_agent", "arguments": {"agent_id": child, "message": "hi"}},
                                       {"name": "kill_agent", "arguments": {"agent_id": child}},
                                       {"name": "kill_agent", "arguments": {"agent_id": run_ids[0]}}]}
            return say("done")
        return say("nothing to do")

    run_ids: list[str] = []
    model = FnModel(answer)
    run = start(folder, model, home, workdir)
    run_ids.append(run.run_id)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    _, send, kill, self_kill = results([r for r in model.requests if r.stage == "boss"][-1])
    assert send.startswith("[error] sub-agent '") and "has already ended (complete)" in send
    assert kill.endswith("had already ended (status: complete).")
    assert self_kill.startswith("[error] kill_agent: '") and "is this run itself" in self_kill


def test_the_configuration_may_deny_starting_agents(tmp_path, home, workdir):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[tool_permissions]\nspawn_agent = "deny"\n', encoding="utf-8")
    folder = boss_folder(tmp_path)
    turns = iter([call("spawn_agent", blueprint="helper", task="t"), say("ok")])
    model = FnModel(lambda request: next(turns))
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    [result] = results(model.requests[-1])
    assert result.startswith("[denied]"), result
    assert run.meta["children"] == []


def test_a_childs_cost_is_counted_in_its_parents_cost(tmp_path, home, workdir):
    sonnet = 'model = { provider = "anthropic", model = "claude-sonnet-4-6" }'
    folder = boss_folder(tmp_path, stage_extra=sonnet, helper_extra=sonnet)

    def answer(request):
        seen = results(request)
        if request.stage == "boss":
            return say("done") if seen else call("spawn_agent", blueprint="helper", task="t", wait=True)
        return say("ok") if seen else call("submit_output", content="x")

    model = FnModel(answer)
    model.name = "anthropic"  # priced as the published anthropic model: 10 tokens in, 2 out a call
    run = start(folder, model, home, workdir).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    per_call = (10 * 3.0 + 2 * 15.0) / 1_000_000
    child = run.children[0]
    assert child.meta["cost_usd"] == pytest.approx(2 * per_call)
    assert run.usage["children"]["cost_usd"] == pytest.approx(2 * per_call)
    assert run.usage["children"]["runs"] == 1
    assert run.usage["total"]["cost_usd"] == pytest.approx(4 * per_call)  # its own two calls and the child's
    assert run.usage["by_stage"]["boss"]["calls"] == 4  # counted under the stage that spawned it
    assert run.usage["cost_usd"] == run.meta["cost_usd"] == pytest.approx(4 * per_call)


def test_usage_roll_up_counts_grandchildren_once_and_an_unpriced_call_anywhere():
    from lev_nb.engine.record import UsageBook
    from lev_nb.store import RunMeta

    def totals(calls, usd, unpriced=0):
        return {"calls": calls, "prompt_tokens": 10 * calls, "completion_tokens": calls, "cached_tokens": 0,
                "cache_write_tokens": 0, "priced_usd": usd, "unpriced_calls": unpriced,
                "cost_usd": None if unpriced else usd}

    middle, middle_meta = UsageBook(), RunMeta(run_id="middle", agent_name="m", task="t")
    middle.add_child("work", totals(2, 0.25))  # the grandchild
    middle.total.absorb(middle.total.from_dict(totals(1, 1.0)))  # the middle run's own call
    middle.write(middle_meta)
    parent, parent_meta = UsageBook(), RunMeta(run_id="parent", agent_name="p", task="t")
    parent.total.absorb(parent.total.from_dict(totals(1, 0.5)))
    parent.add_child("boss", middle_meta.usage["total"])
    parent.write(parent_meta)
    kids = parent_meta.usage["children"]
    assert (kids["runs"], kids["calls"], kids["prompt_tokens"]) == (1, 3, 30)  # the grandchild once
    assert kids["cost_usd"] == 1.25 and parent_meta.cost_usd == 1.75
    parent.add_child("boss", totals(1, 0.0, unpriced=1))
    parent.write(parent_meta)
    assert parent_meta.usage["children"]["cost_usd"] is None and parent_meta.cost_usd is None


def test_cancelling_a_run_held_for_its_children_cancels_them_and_clears_the_wait(tmp_path, home, workdir):
    folder = boss_folder(tmp_path, stage_extra="requires_children = true")
    never = Gate()

    async def answer(request):
        if request.stage == "boss":
            return say("done") if results(request) else call("spawn_agent", blueprint="helper", task="slow")
        await never.wait()
        return say("unreachable")

    run = start(folder, FnModel(answer), home, workdir)
    wait_for_event(run, "children_awaited")
    run.cancel()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "cancelled"
    assert run.children[0].status == "cancelled"
    record = meta_of(home, run.run_id)
    assert record["waiting_on"] is None and record["child_runs"][0]["status"] == "cancelled"
    never.opened.set()


# -- the tree's width (issue 26) ------------------------------------------------------------------
def test_a_tree_starts_at_most_max_agents_per_tree_sub_agents(tmp_path, home, workdir):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[limits]\nmax_agents_per_tree = 3\n", encoding="utf-8")
    folder = boss_folder(tmp_path)
    spawns = {"tool_calls": [{"name": "spawn_agent", "arguments": {"blueprint": "helper", "task": f"part {i}"}}
                             for i in range(5)]}

    async def answer(request):
        if request.stage == "boss":
            return spawns if not called(request, "spawn_agent") else say("done")
        return call("submit_output", content="ok") if not called(request, "submit_output") else say("done")

    run = start(folder, FnModel(answer), home, workdir)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert len([m for m in all_metas(home) if m.get("parent_run_id")]) == 3
    denied = [r for r in run.events.snapshot() if r.kind == "tool_finished" and "max_agents_per_tree = 3" in (r.summary or "")]
    assert len(denied) == 2


def test_no_sub_agent_starts_once_an_ancestor_is_stopping(tmp_path, home, workdir):
    folder = boss_folder(tmp_path)
    held = Gate()

    async def answer(request):
        if request.stage == "boss":
            return call("spawn_agent", blueprint="helper", task="level one", wait=True)
        await held.wait()
        return say("done")

    run = start(folder, FnModel(answer), home, workdir)
    assert held.reached.wait(RUN_TIMEOUT_S)
    (link,) = run._runner.subagents.links.values()
    assert link.runner.tree_spawn_refusal() is None  # may start one (and it is counted)
    run.cancel()  # the flag is set at once; the cancellation reaches the child a moment later
    child_told = link.runner._cancel_requested  # on a busy machine the child may have heard already
    refusal = link.runner.tree_spawn_refusal()
    ancestor = f"its ancestor run '{run.run_id}' is stopping"
    assert refusal is not None
    assert ("this run is stopping" in refusal) if child_told else (ancestor in refusal or "this run is stopping" in refusal)
    held.opened.set()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "cancelled"
