"""Ctrl-C (SIGINT) at several points of ``lev run``, once and twice, in a real process: before the run
exists (reading the task), while the run starts (a seed command), and mid-run (a tool call). Each
ends with exit status 130, one clear message and no traceback; a run that existed ends with a
record that says ``paused`` (interrupted), never one left ``running``, and ``lev resume`` continues
it (issue 26: Ctrl-C leaves a run that can be resumed, as SIGKILL does)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lev_nb.store.files import read_jsonl

pytestmark = pytest.mark.slow

WAIT_S = 60  # generous: only a hung process takes this long (the commands it runs sleep 300 s)

AGENT = """
[agent]
name = "interrupts"
[context.regions]
system = { kind = "pinned", max_tokens = 2000 }
task = { kind = "pinned", max_tokens = 2000, seed = "task_input" }
{extra_region}
conversation = { kind = "sliding_window", max_items = 20, max_tokens = 8000 }
[tool_permissions]
shell = "allow"
write_file = "allow"  # its commands redirect into files (a write)
[stages.work]
mode = "output"
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
available_tools = ["shell"]
max_iterations = 4
[stages.work.transitions]
"""


def agent(tmp_path: Path, extra_region: str = "") -> Path:
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    (folder / "agent.leviath").write_text(AGENT.replace("{extra_region}", extra_region), encoding="utf-8")
    return folder


def start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # This machine honours the blueprint's own shell = "allow" (the mid-run case runs a shell tool).
    (home / "config.toml").write_text("[security]\nallow_blueprint_permissions = true\n", encoding="utf-8")
    env = {**os.environ, "LEV_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "lev_nb.cli", "run", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


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


def interrupt(proc: subprocess.Popen[str], times: int) -> tuple[str, str]:
    for _ in range(times):
        proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("lev run did not stop after Ctrl-C")
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    return out, err


def events_say(tmp_path: Path, kind: str) -> Callable[[], bool]:
    def check() -> bool:
        for path in (tmp_path / "home" / "runs").glob("*/events.jsonl"):
            if any(event.get("type") == kind for event in read_jsonl(path)):
                return True
        return False

    return check


def the_record(tmp_path: Path) -> dict:
    (meta,) = (tmp_path / "home" / "runs").glob("*/meta.json")
    return json.loads(meta.read_text(encoding="utf-8"))


@pytest.mark.parametrize("times", [1, 2])
def test_ctrl_c_while_the_task_is_read_stops_before_anything_is_written(tmp_path: Path, times: int) -> None:
    fifo = tmp_path / "task.fifo"
    os.mkfifo(fifo)
    proc = start(tmp_path, str(agent(tmp_path)), "--task", f"@{fifo}", "--model", "mock")
    writer: list[int] = []

    def opened() -> bool:  # a writer can open the pipe once lev has opened it to read the task
        try:
            writer.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True

    def blocked_in_read() -> bool:
        # Signal only once lev waits inside read(): a signal that lands just before the call
        # starts is handled by Python only when the call returns (here: never).
        return "pipe_read" in Path(f"/proc/{proc.pid}/wchan").read_text()

    wait_for(opened, proc)
    wait_for(blocked_in_read, proc)
    try:
        out, err = interrupt(proc, times)
    finally:
        os.close(writer[0])
    assert out == "" and err == "lev: interrupted\n"
    assert not (tmp_path / "home" / "runs").exists()


def _stopped_lines(run_id: str) -> list[str]:
    return [f"lev run: stopping the run; `lev resume {run_id}` continues it (Ctrl-C again does not stop it sooner)",
            "lev run: paused · 0 stages · 0 model calls, 0 tool calls · $0.0000",
            f"lev run: the run was interrupted (Ctrl-C); `lev resume {run_id}` continues it"]


@pytest.mark.parametrize("times", [1, 2])
def test_ctrl_c_while_the_run_starts_stops_it_resumably(tmp_path: Path, times: int) -> None:
    slow_seed = 'slow = { kind = "pinned", max_tokens = 200, seed = { command = "sleep 300" } }'
    proc = start(tmp_path, str(agent(tmp_path, slow_seed)), "--task", "t", "--model", "mock")
    wait_for(events_say(tmp_path, "run_started"), proc)  # the run exists and is seeding its regions
    out, err = interrupt(proc, times)
    record = the_record(tmp_path)
    assert out.strip() == record["run_id"]
    assert err.splitlines() == _stopped_lines(record["run_id"])
    assert record["status"] == "paused" and record["stage_history"] == []
    assert record["needs_setup"]["blocker"] == "interrupted"


@pytest.mark.parametrize("times", [1, 2])
def test_ctrl_c_mid_run_stops_it_and_lev_resume_continues_it(tmp_path: Path, times: int) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"tool_calls": [{"name": "shell", "arguments": {"command": "echo started >> ledger; sleep 300"}}]},
        {"tool_calls": [{"name": "submit_output", "arguments": {"content": "the answer"}}]},
        {"text": "done"},
    ]), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    proc = start(tmp_path, str(agent(tmp_path)), "--task", "t", "--model", f"scripted:{script}", "--workdir",
                 str(work))
    # The command is running (it starts once its process group is watched, a moment after tool_started).
    wait_for(lambda: events_say(tmp_path, "tool_started")() and (work / "ledger").exists(), proc)
    out, err = interrupt(proc, times)
    record = the_record(tmp_path)
    run_id = record["run_id"]
    assert out.strip() == run_id
    assert _stopped_lines(run_id)[0] in err.splitlines() and err.splitlines()[-1] == _stopped_lines(run_id)[-1]
    assert record["status"] == "paused" and record["stage_history"] == ["work"]
    # Resumed as recorded: the stopped command is reported, not run again; the script goes on.
    env = {**os.environ, "LEV_HOME": str(tmp_path / "home")}
    resumed = subprocess.run([sys.executable, "-m", "lev_nb.cli", "resume", run_id, "--quiet"], env=env,
                             text=True, capture_output=True, timeout=WAIT_S)
    assert resumed.returncode == 0, resumed.stderr
    record = the_record(tmp_path)
    assert record["status"] == "complete" and record["resumed"]["from"] == ["paused"]
    assert (work / "ledger").read_text() == "started\n"
    assert "[interrupted]" in (tmp_path / "home" / "runs" / run_id / "transcript.jsonl").read_text()
