"""The run record on disk: meta.json, events.jsonl, transcript.jsonl, final_output; cancel; bad workdir."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from support import call, events_of, kinds, say

from lev_nb.messages import ModelRequest, ModelResponse

UPSTREAM_FIELDS = {
    "run_id", "agent_name", "task", "status", "current_stage", "iteration", "tool_calls",
    "prompt_tokens", "completion_tokens", "started_at", "updated_at", "error", "flags",
    "final_output", "parent_run_id", "children",
}
FLAG_FIELDS = {
    "modified_files", "modified_file_count", "empty_output", "no_output_tools", "searches_run",
    "searches_empty", "max_iterations_hit", "gates_forced", "required_regions_abandoned",
    "workspace_lost", "produced_output", "output_forced", "splits_degraded",
}

TWO_STAGES = """
[stages.work]
available_tools = ["list_dir"]
[stages.work.transitions.answer]
hint = "write it up"
[stages.answer]
mode = "output"
available_tools = ["submit_output"]
output = { format = "markdown" }
[stages.answer.transitions]
"""
TURNS = [call("list_dir"), say("found it"), call("submit_output", content="# Résumé\n\nAll good ✓"), say("bye")]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_meta_json_has_the_upstream_fields_and_stage_history(engine, home: Path):
    run, _ = engine.run(TWO_STAGES, TURNS, task="summarise the repo")
    run_dir = Path(run.run_dir)
    assert run_dir.parent == home / "runs"
    meta = json.loads((run_dir / "meta.json").read_text())
    assert UPSTREAM_FIELDS <= set(meta)
    assert FLAG_FIELDS <= set(meta["flags"])
    assert meta["run_id"] == run.run_id == run_dir.name
    assert meta["agent_name"] == "engine-test"
    assert meta["task"] == "summarise the repo"
    assert meta["status"] == "complete"
    assert meta["current_stage"] == "answer"
    assert meta["stage_history"] == ["work", "answer"]
    assert meta["iteration"] == 4
    assert meta["tool_calls"] == 2
    assert meta["prompt_tokens"] > 0 and meta["completion_tokens"] > 0
    assert meta["final_output"]["format"] == "markdown"
    assert meta["final_output"]["stage"] == "answer"
    assert meta["final_output"]["bytes"] == len("# Résumé\n\nAll good ✓".encode())
    assert meta["parent_run_id"] is None and meta["children"] == []
    assert meta == run.meta


def test_events_jsonl_matches_run_events(engine):
    run, _ = engine.run(TWO_STAGES, TURNS)
    on_disk = read_jsonl(Path(run.run_dir) / "events.jsonl")
    live = [json.loads(json.dumps(e.to_dict(), default=str)) for e in run.events]
    assert on_disk == live
    assert on_disk[0]["type"] == "run_started" and on_disk[-1]["type"] == "completed"
    assert all(e["run_id"] == run.run_id for e in on_disk)


def test_transcript_has_one_entry_per_model_call(engine):
    run, model = engine.run(TWO_STAGES, TURNS)
    transcript = read_jsonl(Path(run.run_dir) / "transcript.jsonl")
    assert len(transcript) == len(model.requests) == len(events_of(run, "model_call"))
    assert [t["stage"] for t in transcript] == ["work", "work", "answer", "answer"]
    assert transcript[0]["response"]["tool_calls"][0]["name"] == "list_dir"
    assert transcript[1]["response"]["text"] == "found it"


def test_final_output_sidecar_holds_the_answer_bytes(engine):
    run, _ = engine.run(TWO_STAGES, TURNS)
    sidecar = (Path(run.run_dir) / "final_output").read_bytes()
    assert sidecar == run.result.content.encode("utf-8")
    assert sidecar == "# Résumé\n\nAll good ✓".encode()


def test_no_final_output_file_without_a_submission(engine):
    run, _ = engine.run("[stages.w]\navailable_tools = [\"list_dir\"]\n[stages.w.transitions]", [call("list_dir"), say("x")])
    assert run.status == "complete", run.error
    assert not (Path(run.run_dir) / "final_output").exists()
    assert run.result is None
    assert run.meta["final_output"] is None


def test_a_missing_workdir_is_created_and_the_run_says_so(engine, tmp_path: Path):
    missing = tmp_path / "does-not-exist" / "deeper"
    run, _ = engine.run(TWO_STAGES, TURNS, workdir=missing)
    assert run.status == "complete" and missing.is_dir()
    assert run.workdir == str(missing)
    warnings = [e.message for e in run.events.snapshot() if e.kind == "warning"]
    assert f"the working directory '{missing}' did not exist, so the run created it" in warnings


def test_a_workdir_that_is_a_file_is_refused_before_the_run_exists(engine, tmp_path: Path):
    from lev_nb.engine.launch import LaunchError

    a_file = tmp_path / "notes.txt"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(LaunchError) as info:
        engine.run(TWO_STAGES, TURNS, workdir=a_file)
    assert str(info.value) == f"the working directory '{a_file}' is a file, not a folder; pass workdir= with a folder"
    assert not (engine.home / "runs").exists()


class BlockingModel:
    """A provider that never answers until released (to cancel a run mid-call)."""

    name = "blocking"

    def __init__(self) -> None:
        self.called = threading.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.called.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


def test_cancel_ends_the_run_cancelled_with_a_complete_record(engine):
    model = BlockingModel()
    run, _ = engine.start(TWO_STAGES, model)
    assert model.called.wait(30)
    assert not run.done()
    run.cancel()
    run.wait(30)
    assert run.status == "cancelled"
    assert kinds(run)[-1] == "completed"
    assert events_of(run, "completed")[0].status == "cancelled"
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["status"] == "cancelled"
    assert meta["stage_history"] == ["work"]
    on_disk = read_jsonl(Path(run.run_dir) / "events.jsonl")
    assert on_disk[-1]["type"] == "completed" and on_disk[-1]["status"] == "cancelled"


def test_result_while_the_run_goes_says_to_wait_and_none_after_it_ended_without_one(engine):
    from lev_nb import RunNotFinished

    model = BlockingModel()
    run, _ = engine.start(TWO_STAGES, model)
    assert model.called.wait(30)
    with pytest.raises(RunNotFinished) as info:
        run.result
    assert f"run {run.run_id} is still running" in str(info.value)
    assert "run.wait() or await run" in str(info.value)
    run.cancel()
    assert run.wait(30).result is None


def test_cancel_after_the_end_changes_nothing(engine):
    run, _ = engine.run(TWO_STAGES, TURNS)
    run.cancel()
    run.wait(5)
    assert run.status == "complete"


def test_on_complete_callback_receives_the_run(engine):
    seen = []
    done = threading.Event()

    def on_complete(r):
        seen.append((r.run_id, r.status))
        done.set()

    run, _ = engine.start(TWO_STAGES, TURNS, on_complete=on_complete)
    run.wait(30)
    assert done.wait(30)
    assert seen == [(run.run_id, "complete")]


def test_cancel_right_after_start_still_writes_a_record(engine):
    model = BlockingModel()
    run, _ = engine.start(TWO_STAGES, model)
    run.cancel()
    run.wait(30)
    assert run.status == "cancelled"
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["status"] == "cancelled"
    assert kinds(run)[-1] == "completed"
