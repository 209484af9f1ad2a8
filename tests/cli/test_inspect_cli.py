"""Looking at a run from another process: ``lev show``, ``lev log [--follow]``, ``lev context`` and
``lev stages`` while a ``lev run`` process is running it and after it ended, and ``lev cancel`` /
``lev kill`` of a run another process runs.

The run is a real ``lev run`` process on a scripted model; its shell tool waits for a file the test
writes, so the run stays live exactly as long as the test needs it to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lev_nb.store.files import read_jsonl

pytestmark = pytest.mark.slow

WAIT_S = 60  # generous: only a hung process takes this long

AGENT = """
[agent]
name = "waiter"
[stages.work]
model = { provider = "anthropic", model = "m" }
available_tools = ["shell", "write_file", "submit_output"]
[stages.work.transitions]
"""
WAIT_FOR_GO = "while [ ! -f go ]; do sleep 0.05; done"


def script(tmp_path: Path) -> Path:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
        {"tool_calls": [{"name": "shell", "arguments": {"command": WAIT_FOR_GO}}]},
        {"tool_calls": [{"name": "submit_output", "arguments": {"content": "all done\nsecond line"}}]},
        {"text": "done"},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns), encoding="utf-8")
    return path


class LiveRun:
    """``lev run`` in another process, held in its shell call until :meth:`go`."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.home = tmp_path / "home"
        self.workdir = tmp_path / "work"
        self.workdir.mkdir()
        folder = tmp_path / "agent"
        folder.mkdir()
        (folder / "agent.leviath").write_text(AGENT, encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lev_nb.cli", "run", str(folder), "--task", "wait for it", "--model",
             f"scripted:{script(tmp_path)}", "--allow", "shell", "--workdir", str(self.workdir), "--quiet"],
            env=env(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.run_dir = self._wait_for_shell()
        self.run_id = self.run_dir.name

    def _wait_for_shell(self) -> Path:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for events in (self.home / "runs").glob("*/events.jsonl"):
                if any(event.get("tool") == "shell" for event in read_jsonl(events)):
                    return events.parent
            assert self.proc.poll() is None, self.proc.communicate()
            time.sleep(0.05)
        raise AssertionError("the run never reached its shell call")

    def go(self) -> None:
        """Let the shell call (and the run) finish; also ends the loop of a killed run's shell."""
        (self.workdir / "go").write_text("", encoding="utf-8")

    def meta(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "meta.json").read_text(encoding="utf-8"))

    def close(self) -> None:
        self.go()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=WAIT_S)


@pytest.fixture
def live(tmp_path: Path):
    made: list[LiveRun] = []

    def start() -> LiveRun:
        made.append(LiveRun(tmp_path))
        return made[-1]

    yield start
    for run in made:
        run.close()


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "LEV_HOME": str(tmp_path / "home"), "COLUMNS": "200"}


def lev(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lev_nb.cli", *args], env=env(tmp_path), text=True,
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=WAIT_S)


def test_show_log_context_and_stages_of_a_run_in_another_process(tmp_path: Path, live) -> None:
    run = live()
    prefix = run.run_id[:-4]  # a unique prefix is enough, as for lev result
    # While it runs: its story so far, and the events as they come.
    shown = lev(tmp_path, "show", prefix)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"waiter  {run.run_id}  running")
    assert "Called shell(" not in shown.stdout  # tool traffic is the transcript, not the story
    assert "1 tool call denied:" in shown.stdout and "write_file: Tool 'write_file' needs a person's approval" in shown.stdout
    follow = subprocess.Popen([sys.executable, "-m", "lev_nb.cli", "log", run.run_id, "--follow"], env=env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    assert follow.stdout is not None
    while "Called shell(" not in seen:  # what was written before it started comes first
        line = follow.stdout.readline()
        assert line, follow.communicate()
        seen += line
    assert follow.poll() is None  # still following: the run goes on
    context = lev(tmp_path, "context", run.run_id)
    assert context.returncode == 0, context.stderr
    assert "its last request (model turn 2 in stage work, scripted/m" in context.stdout
    assert "REGION" in context.stdout and "conversation  sliding_window" in context.stdout
    run.go()
    rest, err = follow.communicate(timeout=WAIT_S)
    assert follow.returncode == 0, err
    lines = (seen + rest).splitlines()
    assert any("Run started: wait for it" in line for line in lines)
    assert any("write_file failed." in line for line in lines)
    assert any("Submitted the final output: 20 B." in line for line in lines)
    assert lines[-1].endswith("Run complete.")
    assert "model_text" not in rest
    assert f"run {run.run_id} is complete" in err
    assert run.proc.wait(WAIT_S) == 0

    # Afterwards: the whole story, the ledger, the last request in full, the events as JSON.
    shown = lev(tmp_path, "show", run.run_id).stdout
    assert shown.startswith(f"waiter  {run.run_id}  complete\ntask: wait for it\n")
    assert "path: work\n" in shown
    assert "4 model calls · 3 tool calls" in shown
    assert "STAGE  VISITS  TIME" in shown and "\nwork   1 " in shown
    assert "answer (text, 20 B) from work:\n  all done\n  second line\n" in shown
    stages = lev(tmp_path, "stages", run.run_id, "--json")
    ledger = json.loads(stages.stdout)
    assert [(s["stage"], s["status"], s["calls"]) for s in ledger["stages"]] == [("work", "complete", 4)]
    meta = run.meta()
    assert ledger["stages"][0]["prompt_tokens"] == meta["usage"]["by_stage"]["work"]["prompt_tokens"] > 0
    table = lev(tmp_path, "stages", run.run_id, "--regions").stdout
    assert table.splitlines()[0].split() == ["STAGE", "STATUS", "PROMPT", "OUTPUT", "CACHE", "RD", "CACHE", "WR",
                                             "CALLS", "COST"]
    assert "TOTAL" in table and "work: the most tokens each region held in one request" in table
    full = lev(tmp_path, "context", run.run_id, "--full").stdout
    assert "its last request (model turn 4 in stage work" in full
    assert "── system: system" in full and "Task: wait for it" in full
    assert "[calls submit_output(" in full and "[calls shell(" in full
    as_json = json.loads(lev(tmp_path, "context", run.run_id, "--json").stdout)
    assert as_json["stage"] == "work" and {r["name"] for r in as_json["regions"]} >= {"system", "conversation"}
    raw = lev(tmp_path, "log", run.run_id, "--json").stdout.splitlines()
    assert [json.loads(line)["type"] for line in raw][-1] == "completed"


def test_cancel_a_run_in_another_process(tmp_path: Path, live) -> None:
    run = live()
    done = lev(tmp_path, "cancel", run.run_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"run {run.run_id} ended cancelled (cancelled by lev cancel (pid ")
    assert run.proc.wait(WAIT_S) == 130  # lev run says how its run ended
    meta = run.meta()
    assert meta["status"] == "cancelled" and meta["error"].startswith("cancelled by lev cancel (pid ")
    assert "Run cancelled by lev cancel" in lev(tmp_path, "log", run.run_id).stdout
    assert "cancelled in work: cancelled by lev cancel" in lev(tmp_path, "show", run.run_id).stdout
    for command in ("cancel", "kill"):
        again = lev(tmp_path, command, run.run_id)
        assert again.returncode == 1
        assert again.stderr == f"lev {command}: run '{run.run_id}' has already ended (cancelled); there is nothing to stop\n"


@pytest.mark.parametrize("force", [False, True])
def test_kill_the_process_of_a_run_then_cancel_its_record(tmp_path: Path, live, force: bool) -> None:
    run = live()
    done = lev(tmp_path, "kill", run.run_id, *(["--force"] if force else []))
    assert done.returncode == 0, done.stderr
    name = "SIGKILL" if force else "SIGTERM"
    assert done.stdout.startswith(f"stopped process {run.proc.pid} with {name}.")
    assert f"`lev resume {run.run_id}` continues it" in done.stdout
    assert run.proc.wait(WAIT_S) == -(signal.SIGKILL if force else signal.SIGTERM)
    assert run.meta()["status"] == "running"  # the record stays as it stood: resumable
    assert "1 abandoned run" in lev(tmp_path, "ps").stdout
    again = lev(tmp_path, "kill", run.run_id)
    assert again.returncode == 1 and "is already gone" in again.stderr
    closed = lev(tmp_path, "cancel", run.run_id)
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout == f"run {run.run_id} is cancelled (it was running, and no process was running it)\n"
    meta = run.meta()
    assert meta["status"] == "cancelled" and f"after its process (pid {run.proc.pid}) was gone" in meta["error"]
    assert lev(tmp_path, "log", run.run_id).stdout.rstrip().endswith(f"after its process (pid {run.proc.pid}) was gone.")


def test_commands_refuse_an_unknown_run_with_one_line(tmp_path: Path) -> None:
    for command in ("show", "log", "context", "stages", "cancel", "kill"):
        result = lev(tmp_path, command, "nosuchrun")
        assert result.returncode == 1
        assert result.stderr.startswith(f"lev {command}: no run id starts with 'nosuchrun'")
        assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_help_lists_the_commands(tmp_path: Path) -> None:
    listing = lev(tmp_path, "--help").stdout
    for command in ("show", "log", "context", "stages", "cancel", "kill"):
        assert f"\n    {command} " in listing
    assert "SIGKILL" in lev(tmp_path, "kill", "--help").stdout


def test_run_verbose_tells_each_event_on_stderr(tmp_path: Path) -> None:
    triage = Path(__file__).resolve().parents[2] / "blueprints" / "triage"
    result = lev(tmp_path, "run", str(triage), "--task", f"@{triage / 'reports.txt'}", "--model", "mock", "-v")
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip()
    assert "\n" not in run_id  # stdout holds the run id alone
    # The events as `lev log` tells them; warnings are told once, as `lev run: warning` lines, and the
    # run ends with its summary line.
    told = [line for line in result.stderr.splitlines() if line[:2].isdigit()]
    assert "Run started: " in told[0]
    assert told[-1].endswith("Run complete.")
    assert result.stderr.splitlines()[-1].startswith("lev run: complete · ")
    logged = [line for line in lev(tmp_path, "log", run_id).stdout.splitlines()
              if not line.startswith(" ") and "WARNING: " not in line]
    assert told == logged  # the same sentences as lev log
