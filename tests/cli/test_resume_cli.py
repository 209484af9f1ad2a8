"""``lev resume`` against real processes: a ``lev run`` SIGKILLed mid-run, after a tool call with a
side effect completed, is continued by ``lev resume`` in the same folder under the same id, and the
completed call is not run again; a run still owned by a live process, an ended run and an unknown
id are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

WAIT_S = 60

AGENT = """
[agent]
name = "appender"
[tool_permissions]
shell = "allow"
write_file = "allow"  # the log is appended through a redirect, which is a write
[stages.work]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
available_tools = ["shell"]
max_iterations = 10
nudge = { enabled = false }
[stages.work.transitions]
"""


def shell(command: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def setup(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.leviath").write_text(AGENT, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[security]\nallow_blueprint_permissions = true\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    return folder, {**os.environ, "LEV_HOME": str(home)}, work


def lev(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lev_nb.cli", *args], env=env, text=True,
                          capture_output=True, timeout=WAIT_S)


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"lev run ended before the point under test: {proc.returncode} {out!r} {err!r}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("lev run never reached the point under test")
        time.sleep(0.02)


def test_a_killed_run_is_resumed_without_repeating_a_completed_tool_call(tmp_path: Path) -> None:
    folder, env, work = setup(tmp_path)
    first = tmp_path / "first.json"
    first.write_text(json.dumps([
        shell("echo one >> log.txt"),
        # The second call waits until the test says go: the run is killed while it waits.
        shell("touch waiting; while [ ! -f go ]; do sleep 0.05; done"),
    ]), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lev_nb.cli", "run", str(folder), "--task", "append lines", "--model",
         f"scripted:{first}", "--workdir", str(work), "--quiet"],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: (work / "waiting").exists(), proc)
        [run_dir] = (Path(env["LEV_HOME"]) / "runs").iterdir()
        run_id = run_dir.name

        # Still running in a live process: refused.
        busy = lev(env, "resume", run_id)
        assert busy.returncode == 1
        assert f"run '{run_id}' is still running in process {proc.pid}" in busy.stderr
    finally:
        proc.kill()
        proc.communicate(timeout=WAIT_S)
        (work / "go").touch()  # the orphaned shell command finishes
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "running"  # what the killed process left
    assert (work / "log.txt").read_text() == "one\n"

    nxt = tmp_path / "next.json"
    nxt.write_text(json.dumps([shell("echo three >> log.txt"), {"text": "all lines appended"}]), encoding="utf-8")
    out = lev(env, "resume", run_id[:20], "--model", f"scripted:{nxt}", "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == run_id
    # The first call's line is there once: it was replayed from the journal, not run again. The
    # second call was in flight when the process died: it is reported as interrupted, not run again.
    assert (work / "log.txt").read_text() == "one\nthree\n"
    assert [p.name for p in (Path(env["LEV_HOME"]) / "runs").iterdir()] == [run_id]  # same folder

    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["run_id"] == run_id
    assert meta["resumed"]["count"] == 1 and meta["resumed"]["from"] == ["running"]
    assert meta["iteration"] == 4 and meta["tool_calls"] == 3  # the run's whole life, counted once
    assert meta["pid"] != proc.pid
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds.count("run_started") == 1 and kinds.count("resumed") == 1 and kinds[-1] == "completed"
    resumed = kinds.index("resumed")
    assert "tool_finished" in kinds[:resumed]  # the first life's events are kept, then the resumed run's
    assert events[resumed]["replayed_model_calls"] == 2 and events[resumed]["replayed_tool_calls"] == 1
    finished = [e for e in events[resumed:] if e["type"] == "tool_finished"]
    assert len(finished) == 2  # the interrupted call's report, and the new one
    assert "[interrupted]" in (run_dir / "transcript.jsonl").read_text()

    # Over: refused, and so is an unknown id.
    again = lev(env, "resume", run_id)
    assert again.returncode == 1 and "ended (complete) and cannot be resumed" in again.stderr
    unknown = lev(env, "resume", "no-such-run")
    assert unknown.returncode == 1 and "no run id starts with 'no-such-run'" in unknown.stderr
    assert "Traceback" not in again.stderr + unknown.stderr + busy.stderr


STAND_IN_AGENT = """
[agent]
name = "topped-up"
[stages.draft]
model = { provider = "anthropic", model = "claude-opus-4-6", allow_user_default = false }
available_tools = ["list_dir"]
nudge = { enabled = false }
[stages.draft.transitions]
"""


def test_lev_run_paused_by_the_stand_in_is_finished_by_lev_resume_in_another_process(tmp_path: Path) -> None:
    from standin import API_KEY, Reply, error_body, message, serve, text, tool_use

    folder, env, work = setup(tmp_path)
    (folder / "agent.leviath").write_text(STAND_IN_AGENT, encoding="utf-8")
    (work / "notes.txt").write_text("x")
    for stand_in in serve():
        env.update(ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=stand_in.url)
        stand_in.queue(Reply(body=message(tool_use("toolu_1", "list_dir", {"path": "."}), stop="tool_use")),
                       Reply(402, error_body("billing_error", "Your credit balance is too low")))
        out = lev(env, "run", str(folder), "--task", "look around", "--workdir", str(work), "--quiet")
        assert out.returncode == 3, out.stderr
        run_id = out.stdout.strip()
        assert "Your credit balance is too low" in out.stderr and f"lev resume {run_id}" in out.stderr
        assert "paused: needs credits" in lev(env, "ps").stdout

        stand_in.responder = lambda recorded: Reply(body=message(text("looked at everything")))
        done = lev(env, "resume", run_id, "--quiet")
        assert done.returncode == 0, done.stderr
        assert len(stand_in.requests) == 3  # the answered turn came from the journal
        messages = stand_in.requests[2].body["messages"]
        assert any(isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"])
                   for m in messages)
        meta = json.loads((Path(env["LEV_HOME"]) / "runs" / run_id / "meta.json").read_text())
        assert meta["status"] == "complete" and meta["resumed"]["from"] == ["paused"]
