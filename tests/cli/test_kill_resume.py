"""Issue 26: SIGKILL a ``lev run`` in the middle of a shell call, then ``lev resume`` it.

The command the agent was running dies with the run's process (its whole process group), the
resumed run reports that call as interrupted instead of running it again, and a run on a
``scripted:`` model goes on from the turn where it stopped, not from the script's first turn. A
ledger file that every command appends to shows each finished call exactly once."""

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

pytestmark = pytest.mark.slow

WAIT_S = 60

AGENT = """
[agent]
name = "ledger"
[tool_permissions]
shell = "allow"
write_file = "allow"  # its commands redirect into files (a write)
[stages.work]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
available_tools = ["shell"]
max_iterations = 10
nudge = { enabled = false }
[stages.work.transitions]
"""


def shell(command: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.02)


@pytest.fixture
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


def test_sigkill_then_resume_runs_each_finished_call_once(tmp_path: Path, setup: tuple[Path, dict[str, str], Path]) -> None:
    folder, env, work = setup
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        shell("echo one >> ledger"),
        shell("echo two-start >> ledger; sleep 300 & echo $! > sleep.pid; echo $$ > shell.pid; wait; "
              "echo two-end >> ledger"),
        shell("echo three >> ledger"),
        {"text": "all appended"},
    ]), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "lev_nb.cli", "run", str(folder), "--task", "append",
                             "--model", f"scripted:{script}", "--workdir", str(work), "--quiet"],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait(lambda: (work / "shell.pid").exists() and (work / "shell.pid").read_text().strip() != ""
              or proc.poll() is not None, "the second command started")
        assert proc.poll() is None, proc.communicate()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=WAIT_S)
    # The command died with the run's process: its shell and what it started.
    shell_pid, sleep_pid = int((work / "shell.pid").read_text()), int((work / "sleep.pid").read_text())
    _wait(lambda: _gone(shell_pid) and _gone(sleep_pid), "the killed run's command stopped")
    assert (work / "ledger").read_text() == "one\ntwo-start\n"
    [run_dir] = (Path(env["LEV_HOME"]) / "runs").iterdir()

    # Resumed on the model it started with: the script goes on at its third turn.
    out = subprocess.run([sys.executable, "-m", "lev_nb.cli", "resume", run_dir.name], env=env, text=True,
                         capture_output=True, timeout=WAIT_S)
    assert out.returncode == 0, out.stderr
    assert (work / "ledger").read_text() == "one\ntwo-start\nthree\n"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert any(e["type"] == "warning" and "was running when the run's process stopped" in e["message"]
               for e in events)  # said as a warning (which reaches the terminal with every warning)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "complete"
    transcript = (run_dir / "transcript.jsonl").read_text()
    assert "[interrupted]" in transcript and "may or may not have taken effect" in transcript
