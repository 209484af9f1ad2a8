"""A recorded run read back: ``lev show``'s story (rejections, warnings from meta.json, one visit
for events before the first stage), following events.jsonl while its last line is half-written,
``lev context`` of a record without region sizes, and cancel/kill of a run nobody runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import call, say

from lev_nb.blueprint import load
from lev_nb.explain.context import context_text, last_request
from lev_nb.explain.control import cancel, kill
from lev_nb.explain.record import follow_lines, open_run
from lev_nb.explain.show import story_of, story_text

VALIDATED = """
[agent]
name = "validated"

[stages.answer]
mode = "output"
available_tools = ["submit_output"]
nudge = { enabled = false }
[stages.answer.output]
format = "markdown"
validator = "checks/answer.rhai"
[stages.answer.transitions]
"""
HEADING = 'fn validate(content) {\n  if !content.starts_with("# ") { return "start with a heading"; }\n}\n'


def validated_run(engine: Any, tmp_path: Path) -> Any:
    folder = tmp_path / "agent"
    (folder / "checks").mkdir(parents=True)
    (folder / "agent.leviath").write_text(VALIDATED, encoding="utf-8")
    (folder / "checks" / "answer.rhai").write_text(HEADING, encoding="utf-8")
    turns = [call("submit_output", content="no heading"), call("submit_output", content="still none"),
             call("submit_output", content="# Findings\n\nAll good."), say("ok")]
    run, _ = engine.run(load(str(folder)), turns)
    assert run.status == "complete", run.error
    return run


def test_the_story_tells_rejections_warnings_and_the_answer(engine: Any, tmp_path: Path) -> None:
    run = validated_run(engine, tmp_path)
    meta_path = Path(run.run_dir) / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    # What the warning mechanism records in meta.json (a list; an older record has none).
    meta["warnings"] = [{"code": "validator-unchecked", "message": "the validator could not judge",
                         "stage": "answer", "at": meta["updated_at"]}]
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    record = open_run(run.run_id[:-3], home=engine.home)
    text = story_text(story_of(record))
    assert text.startswith(f"validated  {run.run_id}  complete\n")
    assert "path: answer\n" in text
    assert "\nanswer: 4 turns, 3 tool calls\n" in text
    assert "  REJECTED: Output rejected: " in text
    assert "2 answers rejected; the last in answer: " in text and "start with a heading" in text
    assert "1 warning:\n  answer: [validator-unchecked] the validator could not judge\n" in text
    assert "answer (markdown, 21 B) from answer:\n  # Findings\n\n  All good.\n" in text
    del meta["warnings"]
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    assert "warning:" not in story_text(story_of(open_run(run.run_id, home=engine.home)))


def test_events_before_the_first_stage_belong_to_its_visit(engine: Any) -> None:
    missing = engine.workdir / "not-yet"
    run, _ = engine.run("""
        [stages.work]
        available_tools = []
        [stages.work.transitions]
    """, [say("hello")], workdir=missing)  # the run warns that it created the workdir, then enters work
    story = story_of(open_run(run.run_id, home=engine.home))
    assert [v.stage for v in story.state.visits] == ["work"]
    assert "path: work\n" in story_text(story)
    # A warning told before the first stage is the run's own: in the warnings, not a stage's lines.
    assert "did not exist, so the run created it" in story_text(story)


def test_following_waits_for_a_half_written_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    first, second = json.dumps({"type": "a", "n": 1}), json.dumps({"type": "b", "n": 2})
    path.write_text(first + "\n" + second[:7], encoding="utf-8")  # the writer is in the middle of line 2
    writes = [second[7:] + "\n" + "not json\n", json.dumps({"type": "c"}) + "\n"]
    ended = [False]

    def sleep(_: float) -> None:  # the writer goes on while the reader waits
        with path.open("a", encoding="utf-8") as handle:
            handle.write(writes.pop(0))
        ended[0] = not writes

    seen = list(follow_lines(path, lambda: ended[0], sleep=sleep))
    assert seen == [{"type": "a", "n": 1}, {"type": "b", "n": 2}, {"type": "c"}]


def test_following_a_file_not_written_yet(tmp_path: Path) -> None:
    assert list(follow_lines(tmp_path / "events.jsonl", lambda: True)) == []


def test_context_of_a_record_without_region_sizes() -> None:
    transcript = [
        {"stage": "work", "purpose": "stage", "provider": "p", "model": "m", "iteration": 1,
         "system": ["## task\nDo it"], "messages": [{"role": "user", "content": "Begin."}], "message_count": 1,
         "tools": ["read_file"], "response": {"text": "", "tool_calls": [{"id": "c1", "name": "read_file",
                                                                          "arguments": {"path": "a"}}],
                                               "usage": {"prompt_tokens": 12}}},
        {"stage": "work", "purpose": "compaction", "system": ["summarise"], "messages": [], "message_count": 1},
        {"stage": "work", "purpose": "stage", "provider": "p", "model": "m", "iteration": 2, "system": None,
         "messages": [{"role": "user", "content": [{"type": "ToolResultBlock", "tool_use_id": "c1",
                                                    "content": "file text"}]}],
         "message_count": 3, "tools": ["read_file"], "response": {"text": "done", "usage": {"prompt_tokens": 30}}},
    ]
    request = last_request(transcript)
    assert request is not None and request.number == 3 and request.system == ["## task\nDo it"]
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]
    text = context_text("r1", request, full=True)
    assert "its last request (model turn 2 in stage work, p/m, call 3)" in text
    assert "recorded by an older lev_nb: no region sizes" in text and "system block 1" in text
    assert "the model counted 30 prompt tokens" in text
    assert "[assistant] [calls read_file({\"path\": \"a\"})]" in text and "[result of c1] file text" in text
    assert last_request([]) is None


def test_cancel_closes_a_paused_run_and_kill_refuses_it(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "agent-1790000000-0123456789ab"
    folder.mkdir(parents=True)
    meta = {"run_id": folder.name, "agent_name": "agent", "status": "paused", "pid": 0, "current_stage": "work",
            "started_at": "2026-01-01T00:00:00.000Z", "needs_setup": {"blocker": "credits"}}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    record = open_run(folder.name, home=tmp_path)
    refused = kill(record)
    assert not refused.ok and "is paused: no process runs it" in refused.message
    done = cancel(record, "a test")
    assert done.ok and done.message == f"run {folder.name} is cancelled (it was paused, and no process was running it)"
    after = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert after["status"] == "cancelled" and after["error"] == "cancelled by a test while paused"
    assert after["needs_setup"] is None
    event = json.loads((folder / "events.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert (event["type"], event["status"], event["stage"]) == ("completed", "cancelled", "work")
    assert not cancel(record, "a test").ok


def test_the_story_lists_the_runs_a_run_started(engine: Any) -> None:
    from support import ROOT

    bp = load(str(ROOT / "blueprints" / "research-brief"))
    run = bp.run("Should notebooks embed Rhai?", model="mock", home=engine.home, workdir=engine.workdir).wait(60)
    assert run.status == "complete", run.error
    workers = [c for c in run.meta["child_runs"] if c["kind"] == "worker"]
    assert workers
    text = story_text(story_of(open_run(run.run_id, home=engine.home)))
    assert f"started {len(workers)} runs ({len(workers)} complete):" in text
    for child in workers:
        assert f"  complete  research-brief (worker) {child['run_id']}" in text
    assert "Started a worker of research-brief" not in text  # the fan-out's own line tells of them
