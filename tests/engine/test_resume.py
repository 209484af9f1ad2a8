"""``lev_nb.resume``: a paused run continues from its record (the journal replays its model turns, tool
results, seeds and fan-outs; nothing is asked or run twice), the conversation comes back as it was,
the record says it was resumed, and runs that cannot be resumed are refused with one message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import QUIET_WORK_STAGE, RUN_TIMEOUT_S, blueprint, call, events_of, fail, kinds, say

import lev_nb
from lev_nb.messages import ModelRequest, ModelResponse, ToolResultBlock, Usage
from lev_nb.providers.scripted import ScriptedModel

SHELL_AGENT = """
[agent]
name = "resumable"
[tool_permissions]
shell = "allow"
write_file = "allow"  # the log is appended through a redirect, which is a write
[context.regions]
system = { kind = "pinned", max_tokens = 2000 }
notes = { kind = "pinned", max_tokens = 2000, seed = { command = "mktemp -p . seeded.XXXXXX; echo the notes" } }
conversation = { kind = "sliding_window", max_items = 40, max_tokens = 8000 }
[stages.work]
available_tools = ["shell"]
max_iterations = 10
nudge = { enabled = false }
[stages.work.transitions]
"""


def resume(run: Any, turns: Any, **kw: Any) -> Any:
    model = ScriptedModel(turns) if isinstance(turns, list) else turns
    resumed = lev_nb.resume(run.run_id, model=model, **kw)
    resumed.wait(RUN_TIMEOUT_S)
    return resumed, model


def tool_results(request: ModelRequest) -> list[str]:
    return [b.content for m in request.messages for b in m.blocks() if isinstance(b, ToolResultBlock)]


def test_a_paused_run_resumes_with_its_context_and_without_repeating_a_tool_call(
    engine, blueprint_permissions: Path, workdir: Path
) -> None:
    with blueprint_permissions.open("a") as config:  # the seed makes a file: a program this user pre-approves
        config.write('[safe_commands]\nshell = ["mktemp"]\n')
    run, first = engine.run(SHELL_AGENT, [
        call("shell", command="echo one >> log.txt; echo appended"),
        fail("credits", "the account is empty"),
    ])
    assert run.status == "paused", run.error
    assert (workdir / "log.txt").read_text() == "one\n"
    before = json.loads((Path(run.run_dir) / "meta.json").read_text())

    resumed, second = resume(run, [call("shell", command="echo two >> log.txt"), say("done")])
    assert resumed.status == "complete", resumed.error
    assert resumed.run_id == run.run_id and resumed.run_dir == run.run_dir
    # The tool call of the first life is not run again, nor the seed command.
    assert (workdir / "log.txt").read_text() == "one\ntwo\n"
    assert len(list(workdir.glob("seeded.*"))) == 1
    # The model sees the conversation as it was: the task, the seeded notes, the first call's result.
    request = second.requests[0]
    assert tool_results(request) == ["appended\n"]
    assert "the notes" in "\n".join(request.system)
    assert len(first.requests) == 2 and len(second.requests) == 2  # nothing asked twice
    meta = resumed.meta
    assert meta["resumed"]["count"] == 1 and meta["resumed"]["from"] == ["paused"]
    assert meta["started_at"] == before["started_at"] and meta["needs_setup"] is None
    assert (meta["iteration"], meta["tool_calls"]) == (3, 2)
    assert meta["usage"]["total"]["calls"] == 3  # the failed call bills nothing
    # run.events: the first life's events, then the resumed run's.
    seen = kinds(resumed)
    assert seen.index("paused") < seen.index("resumed") < seen.index("completed")
    assert seen.count("run_started") == 1 and seen.count("stage_entered") == 1
    [event] = events_of(resumed, "resumed")
    assert (event.count, event.from_status, event.replayed_model_calls, event.replayed_tool_calls) == (1, "paused", 1, 1)
    on_disk = [json.loads(line)["type"] for line in (Path(run.run_dir) / "events.jsonl").read_text().splitlines()]
    assert on_disk == seen


def test_a_run_can_pause_and_resume_more_than_once(engine, blueprint_permissions: Path, workdir: Path) -> None:
    run, _ = engine.run(SHELL_AGENT, [call("shell", command="echo one >> log.txt"), fail("credits", "empty")])
    again, _ = resume(run, [call("shell", command="echo two >> log.txt"), fail("transport", "no route to host")],
                      retry=lev_nb.engine.pipeline.inference.RetryPolicy(max_attempts=1))
    assert again.status == "paused" and "could not be reached" in again.pause_reason
    last, _ = resume(again, [say("done")])
    assert last.status == "complete", last.error
    assert (workdir / "log.txt").read_text() == "one\ntwo\n"
    assert last.meta["resumed"]["count"] == 2 and last.meta["resumed"]["from"] == ["paused", "paused"]
    assert len(last.meta["resumed"]["at"]) == 2


def test_refusals(engine, home: Path) -> None:
    done, _ = engine.run("[stages.work]\nnudge = { enabled = false }\n[stages.work.transitions]\n", [say("hi")])
    with pytest.raises(lev_nb.ResumeError, match=r"ended \(complete\) and cannot be resumed"):
        lev_nb.resume(done.run_id)
    with pytest.raises(lev_nb.ResumeError, match="no run id starts with 'nope'"):
        lev_nb.resume("nope")

    class Waiting:
        name = "waiting"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            import asyncio

            await asyncio.sleep(3600)
            raise AssertionError("unreachable")

    live, _ = engine.start("[stages.work]\n[stages.work.transitions]\n", Waiting())
    try:
        with pytest.raises(lev_nb.ResumeError, match="is still running in process"):
            lev_nb.resume(live.run_id)
    finally:
        live.cancel()
        live.wait(RUN_TIMEOUT_S)
    with pytest.raises(lev_nb.ResumeError, match=r"ended \(cancelled\)"):
        lev_nb.resume(live.run_id)

    paused, _ = engine.run("[stages.work]\n[stages.work.transitions]\n", [fail("credits", "empty")])
    (Path(paused.run_dir) / "launch.json").unlink()
    with pytest.raises(lev_nb.ResumeError, match="has no launch.json"):
        lev_nb.resume(paused.run_id)


def test_a_model_object_must_be_given_again(engine) -> None:
    paused, _ = engine.run("[stages.work]\n[stages.work.transitions]\n", [fail("credits", "empty")])
    with pytest.raises(lev_nb.ResumeError, match="ScriptedModel object as its model"):
        lev_nb.resume(paused.run_id)


def test_a_worker_run_is_refused(engine, home: Path) -> None:
    meta = {"run_id": "w-1", "status": "running", "pid": 999999999, "parent_run_id": "p-1"}
    folder = home / "runs" / "w-1"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(lev_nb.ResumeError, match="is a worker of run 'p-1'; resume that run instead"):
        lev_nb.resume("w-1")


# ------------------------------------------------------------------------------------------------
# Fan-out: workers' costs roll into the parent, and a resumed parent does not start them again
# ------------------------------------------------------------------------------------------------
FAN_OUT = """
[agent]
name = "fanner"
[stages.split]
mode = "fan_out"
worker_stage = "worker"
merge_stage = "merge"
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
USAGE = Usage(prompt_tokens=1000, completion_tokens=100)  # $0.0012 at the configured price below
CALL_USD = 0.0012


class Priced:
    """A provider named 'priced' (the configuration prices it) answering by stage."""

    name = "priced"

    def __init__(self, merge_fails: bool = False) -> None:
        self.requests: list[ModelRequest] = []
        self.merge_fails = merge_fails

    async def complete(self, request: ModelRequest) -> ModelResponse:
        from lev_nb.messages import ToolCall
        from lev_nb.providers.base import ProviderError

        self.requests.append(request)
        n = len(self.requests)
        if request.stage == "split":
            items = [{"id": "a", "context": {}}, {"id": "b", "context": {}}]
            return ModelResponse(tool_calls=[ToolCall(f"s{n}", "fan_out", {"items": items})], usage=USAGE)
        if request.stage == "worker":
            if any(tool_results(request)):
                return ModelResponse(text="submitted", usage=USAGE)
            return ModelResponse(tool_calls=[ToolCall(f"w{n}", "submit_output", {"content": "an answer"})], usage=USAGE)
        if self.merge_fails:
            raise ProviderError("credits", "the account is empty")
        return ModelResponse(text="merged", usage=USAGE)


@pytest.fixture
def priced() -> Any:
    lev_nb.configure(model_providers={"priced": {"prices": {"claude-sonnet-4-6": {
        "input_per_mtok": 1.0, "output_per_mtok": 2.0}}}})


def test_worker_costs_roll_into_the_parent(engine, home: Path, priced: Any, lev) -> None:
    run, model = engine.run(FAN_OUT, Priced())
    assert run.status == "complete", run.error
    assert len(model.requests) == 6  # split, 2 x 2 worker turns, merge
    usage = run.usage
    assert usage["total"]["calls"] == 6 and usage["cost_usd"] == pytest.approx(6 * CALL_USD)
    assert usage["by_stage"]["split"]["calls"] == 5  # its own turn and its workers'
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["usage"]["children"]["calls"] == 4 and meta["cost_usd"] == pytest.approx(6 * CALL_USD)
    for child in meta["children"]:
        child_meta = json.loads((home / "runs" / child / "meta.json").read_text())
        assert child_meta["cost_usd"] == pytest.approx(2 * CALL_USD)
    row = next(line for line in lev("ps").stdout.splitlines() if line.startswith(run.run_id))
    assert f"${6 * CALL_USD:.4f}" in row


def test_a_resumed_parent_does_not_run_its_workers_again(engine, home: Path, priced: Any) -> None:
    run, first = engine.run(FAN_OUT, Priced(merge_fails=True))
    assert run.status == "paused", run.error
    children = run.meta["children"]
    assert run.usage["total"]["calls"] == 5
    resumed, second = resume(run, Priced())
    assert resumed.status == "complete", resumed.error
    assert [r.stage for r in second.requests] == ["merge"]  # the workers ran in the first life only
    assert resumed.meta["children"] == children
    assert sorted(p.name for p in (home / "runs").iterdir()) == sorted([run.run_id, *children])
    assert resumed.usage["total"]["calls"] == 6 and resumed.usage["cost_usd"] == pytest.approx(6 * CALL_USD)
    from lev_nb.messages import request_text

    assert "## worker a\nan answer" in request_text(second.requests[0])  # the report, as the workers gave it


def test_a_journal_that_no_longer_matches_the_blueprint_is_cut_where_it_parts(engine, workdir: Path) -> None:
    run, _ = engine.run(QUIET_WORK_STAGE, [call("list_dir", path="."), fail("credits", "empty")])
    journal = Path(run.run_dir) / "journal.jsonl"
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    lines[0]["stage"] = "elsewhere"  # as if the blueprint had changed: the first turn no longer fits
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    resumed, model = resume(run, [say("fresh start")])
    assert resumed.status == "complete", resumed.error
    assert len(model.requests) == 1 and tool_results(model.requests[0]) == []
    assert {"t": "rewind", "n": 0} in [json.loads(line) for line in journal.read_text().splitlines()]


def test_the_blueprint_is_kept_with_the_run(engine, home: Path) -> None:
    bp = blueprint('[stages.work]\navailable_tools = ["submit_output"]\nnudge = { enabled = false }\n'
                   '[stages.work.transitions]\n')
    check = 'fn validate(c) { if !c.contains("ok") { "say ok" } }'
    paused, _ = engine.run(bp, [fail("credits", "empty")], output_format="json", output_validator=check)
    launch = json.loads((Path(paused.run_dir) / "launch.json").read_text())
    assert launch["blueprint"]["text"] == bp.source_text
    assert launch["model_object"] == "ScriptedModel" and launch["output_request"]["format"] == "json"
    assert launch["task"] == "do the task" and launch["output_validator"] == check
    resumed, _ = resume(paused, [call("submit_output", content='{"v": "not yet"}'),
                                 call("submit_output", content='{"v": "ok"}'), say("done")])
    assert resumed.status == "complete", resumed.error
    assert len(events_of(resumed, "output_rejected")) == 1  # the validator given at launch still judges
    assert resumed.result.content == '{"v": "ok"}'


def test_a_batch_cut_short_runs_only_the_calls_that_did_not_finish(
    engine, blueprint_permissions: Path, workdir: Path
) -> None:
    import subprocess

    from support import calls

    run, _ = engine.run(SHELL_AGENT, [
        calls(("shell", {"command": "echo a >> log.txt"}), ("shell", {"command": "echo b >> log.txt"})),
        say("done"),
    ])
    assert run.status == "complete", run.error
    # Make the record what a kill during the batch leaves when the second call had not started: its
    # start and result not journaled (nor anything after it), the status still running, its process
    # gone. (A call that had started is reported as interrupted instead: test_kill_resume.py.)
    folder = Path(run.run_dir)
    entries = [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]
    second_call = entries[1]["response"]["tool_calls"][1]["id"]
    kept = [e for e in entries
            if not (e["t"] in ("tool", "call") and e["call_id"] == second_call) and e.get("n", 0) == 0]
    (folder / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in kept))
    gone = subprocess.Popen(["true"])
    gone.wait()
    meta = json.loads((folder / "meta.json").read_text())
    meta.update(status="running", pid=gone.pid)
    (folder / "meta.json").write_text(json.dumps(meta))

    resumed, _ = resume(run, [say("done again")])
    assert resumed.status == "complete", resumed.error
    lines = (workdir / "log.txt").read_text().splitlines()  # the batch's calls run concurrently
    assert sorted(lines) == ["a", "b", "b"] and lines[-1] == "b"  # a was replayed, b ran again
    assert resumed.meta["resumed"]["from"] == ["running"]
    seen = resumed.events.snapshot()
    after = [e for e in seen[[e.kind for e in seen].index("resumed"):] if e.kind == "tool_finished"]
    assert [e.call_id for e in after] == [second_call]  # the replayed call's events are not told twice


def test_a_call_in_flight_when_the_process_died_is_reported_not_run_again(
    engine, blueprint_permissions: Path, workdir: Path
) -> None:
    import subprocess

    from support import calls

    agent = SHELL_AGENT.replace('available_tools = ["shell"]', 'available_tools = ["shell", "list_dir"]')
    run, _ = engine.run(agent, [
        calls(("shell", {"command": "echo a >> log.txt"}), ("list_dir", {"path": "."})), say("done"),
    ])
    # What a kill leaves while the shell call runs: its start journaled, its result not.
    folder = Path(run.run_dir)
    entries = [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]
    kept = [e for e in entries if e["t"] != "tool" and e.get("n", 0) == 0]
    assert [e["name"] for e in kept if e["t"] == "call"] == ["shell"]  # a read-only call journals no start
    (folder / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in kept))
    gone = subprocess.Popen(["true"])
    gone.wait()
    meta = json.loads((folder / "meta.json").read_text())
    meta.update(status="running", pid=gone.pid)
    (folder / "meta.json").write_text(json.dumps(meta))

    resumed, model = resume(run, [say("done again")])
    assert resumed.status == "complete", resumed.error
    assert (workdir / "log.txt").read_text() == "a\n"  # not run again
    interrupted, listing = tool_results(model.requests[0])[-2:]
    assert interrupted.startswith("[interrupted]") and "echo a >> log.txt" in interrupted  # what it was
    assert "log.txt" in listing and not listing.startswith("[")  # list_dir, read-only, ran again
    assert any("was running when the run's process stopped" in e.message for e in events_of(resumed, "warning"))


class WorkersOutOfCredits(Priced):
    """The workers' model is out of credits on the first try."""

    def __init__(self, broke: bool) -> None:
        super().__init__()
        self.broke = broke

    async def complete(self, request: ModelRequest) -> ModelResponse:
        from lev_nb.providers.base import ProviderError

        from lev_nb.messages import request_text

        if self.broke and request.stage == "worker" and "Work item id: b" in request_text(request):
            self.requests.append(request)
            raise ProviderError("credits", "the account is empty")
        return await super().complete(request)


def test_a_paused_worker_pauses_its_parent_and_the_resume_runs_the_workers_again(
    engine, home: Path, priced: Any
) -> None:
    run, first = engine.run(FAN_OUT, WorkersOutOfCredits(broke=True))
    assert run.status == "paused", run.error
    assert "fan-out worker 'b'" in run.pause_reason and f"lev resume {run.run_id}" in run.pause_reason
    spent = run.usage["total"]["calls"]
    assert spent == 3  # split, and worker a's two turns (b's failed call bills nothing)
    old_workers = run.meta["children"]
    for child in old_workers:
        meta = json.loads((home / "runs" / child / "meta.json").read_text())
        assert meta["status"] in ("complete", "cancelled")  # no worker is left paused on its own
    resumed, second = resume(run, WorkersOutOfCredits(broke=False))
    assert resumed.status == "complete", resumed.error
    assert sorted(r.stage for r in second.requests) == ["merge", "worker", "worker", "worker", "worker"]
    new_workers = resumed.meta["children"]
    assert len(new_workers) == 2 and not set(new_workers) & set(old_workers)
    # Both tries are paid for: the first try's workers, the new workers, split and merge.
    assert resumed.usage["total"]["calls"] == spent + 4 + 1


# ------------------------------------------------------------------------------------------------
# A run paused at any model call, then resumed, ends as the same run uninterrupted
# ------------------------------------------------------------------------------------------------
class PauseAt:
    """The mock model, out of credits at its ``k``-th call."""

    name = "mock"

    def __init__(self, k: int | None) -> None:
        from lev_nb.providers.mock import MockModel

        self.mock = MockModel()
        self.k = k
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        from lev_nb.providers.base import ProviderError

        self.calls += 1
        if self.calls == self.k:
            raise ProviderError("credits", "the account is empty")
        return await self.mock.complete(request)


def outcome(run: Any) -> dict[str, Any]:
    meta = run.meta
    flags = dict(meta["flags"])
    return {
        "status": meta["status"], "stages": meta["stage_history"], "iteration": meta["iteration"],
        # The run's own calls (a pause inside a fan-out's workers makes the resume start new
        # workers, whose calls add to what the first try's cost).
        "tool_calls": meta["tool_calls"], "flags": flags,
        "calls": meta["usage"]["total"]["calls"] - (meta["usage"].get("children") or {}).get("calls", 0),
        "answer": run.result.content if run.result is not None else None,
        "files": sorted(p.name for p in Path(run.workdir).rglob("*") if p.is_file()),
    }


@pytest.mark.parametrize("agent", ["triage", "code-fixer", "research-brief"])
def test_a_run_paused_at_any_model_call_and_resumed_ends_as_the_uninterrupted_run(
    agent: str, tmp_path: Path, home: Path
) -> None:
    from support import BLUEPRINTS

    bp = lev_nb.load(BLUEPRINTS / agent)
    task = {"triage": "R-1: crash on save\nR-2: dark theme", "code-fixer": "Fix the failing test in calc.py",
            "research-brief": "How do tides work?"}[agent]
    whole = bp.run(task, model=PauseAt(None), workdir=tmp_path / "whole").wait(RUN_TIMEOUT_S)
    expected = outcome(whole)
    assert expected["status"] == "complete", whole.error
    total = expected["calls"]
    for k in sorted({1, 2, total // 2, total}):
        paused = bp.run(task, model=PauseAt(k), workdir=tmp_path / f"at-{k}").wait(RUN_TIMEOUT_S)
        assert paused.status == "paused", (k, paused.error)
        resumed, _ = resume(paused, PauseAt(None))
        assert outcome(resumed) == expected, k
        assert resumed.meta["resumed"]["count"] == 1
