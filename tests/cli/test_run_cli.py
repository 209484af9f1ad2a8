"""`lev run` and `lev ps` as a user runs them: real files, scripted models. The commands run in this
process (the ``lev`` fixture); a real process only where it is the point: a killed run, a closed
pipe, the console script and ``python -m lev_nb.cli``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT, Lev

LEV = str(Path(sys.executable).with_name("lev"))

AGENT = """
[agent]
name = "cli-agent"
[context.regions]
system = { kind = "pinned", max_tokens = 2000 }
task = { kind = "pinned", max_tokens = 2000, seed = "task_input" }
notes = { kind = "pinned", max_tokens = 2000, seed = "input" }
conversation = { kind = "sliding_window", max_items = 20, max_tokens = 8000 }
[tool_permissions]
write_file = "allow"
shell = "allow"
[stages.work]
mode = "autonomous"
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
available_tools = ["write_file", "shell"]
max_iterations = 5
[stages.work.transitions.report]
hint = "done"
[stages.report]
mode = "output"
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
max_iterations = 3
[stages.report.transitions]
"""


@pytest.fixture()
def agent(tmp_path: Path) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.leviath").write_text(AGENT, encoding="utf-8")
    return folder


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "LEV_HOME": str(tmp_path / "home")}


def script(tmp_path: Path, turns: list[dict]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns), encoding="utf-8")
    return f"scripted:{path}"


HAPPY = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hi"}}]},
    {"text": "written"},
    {"tool_calls": [{"name": "submit_output", "arguments": {"content": "the answer"}}]},
    {"text": "bye"},
]


@pytest.mark.usefixtures("blueprint_permissions")
def test_run_prints_the_run_id_and_writes_the_record(tmp_path: Path, agent: Path, lev: Lev) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = lev("run", str(agent), "--task", "write a file", "--model", script(tmp_path, HAPPY),
              "--workdir", str(work))
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    meta = json.loads((tmp_path / "home" / "runs" / run_id / "meta.json").read_text())
    assert meta["status"] == "complete"
    assert meta["stage_history"] == ["work", "report"]
    assert meta["flags"]["modified_files"] == ["out.txt"]
    assert (work / "out.txt").read_text() == "hi"


@pytest.mark.usefixtures("blueprint_permissions")
def test_progress_goes_to_stderr_one_line_per_step(tmp_path: Path, agent: Path, lev: Lev) -> None:
    out = lev("run", str(agent), "--task", "t", "--model", script(tmp_path, HAPPY))
    lines = out.stderr.splitlines()
    assert lines == ["stage work", "stage report", "complete",
                     "lev run: complete · 2 stages (work → report) · 4 model calls, 2 tool calls · $0.0000"]


@pytest.mark.usefixtures("blueprint_permissions")
def test_quiet_run_prints_nothing_on_stderr(tmp_path: Path, agent: Path, lev: Lev) -> None:
    out = lev("run", str(agent), "--task", "t", "--quiet", "--model", script(tmp_path, HAPPY))
    assert out.returncode == 0 and out.stderr == ""


def test_json_prints_the_meta(tmp_path: Path, agent: Path, lev: Lev) -> None:
    out = lev("run", str(agent), "--task", "t", "--json", "--model", script(tmp_path, HAPPY))
    meta = json.loads(out.stdout)
    assert meta["status"] == "complete" and meta["final_output"]["stage"] == "report"
    assert meta["agent_name"] == "cli-agent" and meta["task"] == "t"


def test_task_and_caller_inputs_can_come_from_files(tmp_path: Path, agent: Path, lev: Lev) -> None:
    (tmp_path / "task.txt").write_text("task from a file", encoding="utf-8")
    out = lev("run", str(agent), "--task", f"@{tmp_path / 'task.txt'}", "--notes", "remember the milk",
              "--model", script(tmp_path, HAPPY))
    assert out.returncode == 0, out.stderr
    run_dir = tmp_path / "home" / "runs" / out.stdout.strip()
    first = json.loads((run_dir / "transcript.jsonl").read_text().splitlines()[0])
    system = "\n".join(first["system"])
    assert "task from a file" in system and "remember the milk" in system


def test_a_run_that_ends_in_error_exits_1_and_says_why(tmp_path: Path, agent: Path, lev: Lev) -> None:
    turns = [{"error": {"kind": "auth", "message": "bad key"}}]
    out = lev("run", str(agent), "--task", "t", "--model", script(tmp_path, turns))
    assert out.returncode == 1
    assert "bad key" in out.stderr.splitlines()[-1]
    assert out.stdout.strip()  # the run id is still printed, the record exists


def test_a_missing_workdir_is_created(tmp_path: Path, agent: Path, lev: Lev) -> None:
    out = lev("run", str(agent), "--task", "t", "--workdir", str(tmp_path / "new"),
              "--model", script(tmp_path, HAPPY))
    assert out.returncode == 0, out.stderr
    meta = json.loads((tmp_path / "home" / "runs" / out.stdout.strip() / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["workdir"] == str(tmp_path / "new")
    assert (tmp_path / "new").is_dir()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "nonsense"], "mock"),
        (["--model", "scripted:/does/not/exist.json"], "exist.json"),
        (["--output-schema", "{not json"], "--output-schema"),
        (["--notes"], "--notes needs a value"),
    ],
)
def test_bad_arguments_are_one_clear_line(tmp_path: Path, agent: Path, lev: Lev, args: list[str], needle: str) -> None:
    out = lev("run", str(agent), "--task", "t", *args)
    assert out.returncode in (1, 2)
    assert needle in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("option", ["--home", "--retry", "--on-complete", "--blueprint", "--output_schema"])
def test_a_run_parameter_is_not_taken_as_a_caller_input(tmp_path: Path, agent: Path, lev: Lev, option: str) -> None:
    # Passed on as **inputs, these would set start_run's own parameter (e.g. move the run store).
    out = lev("run", str(agent), "--task", "t", option, str(tmp_path / "elsewhere"), "--model", "mock")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"lev run: unknown option {option}") and out.stderr.count("\n") == 1
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "home" / "runs").exists()


def test_a_declared_input_named_like_a_run_parameter_cannot_be_given(tmp_path: Path, lev: Lev) -> None:
    folder = tmp_path / "named-home"
    folder.mkdir()
    (folder / "agent.leviath").write_text(AGENT.replace('seed = "input"', 'seed = { caller = "home" }'),
                                          encoding="utf-8")
    out = lev("run", str(folder), "--task", "t", "--home", str(tmp_path / "elsewhere"), "--model", "mock")
    assert out.returncode == 2
    assert out.stderr == "lev run: --home is not an option of lev run and cannot name a caller input\n"
    assert not (tmp_path / "elsewhere").exists()


def test_unknown_option_on_other_commands_is_refused(lev: Lev) -> None:
    out = lev("ps", "--bogus")
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr


def test_ps_lists_runs_with_their_status(tmp_path: Path, agent: Path, lev: Lev) -> None:
    ok = lev("run", str(agent), "--task", "t", "--model", script(tmp_path, HAPPY)).stdout.strip()
    bad = lev("run", str(agent), "--task", "t", "--model",
              script(tmp_path, [{"error": {"kind": "auth", "message": "no key"}}])).stdout.strip()
    out = lev("ps")
    assert out.returncode == 0
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:]}
    assert "complete" in rows[ok]
    assert "error:" in rows[bad] and "no key" in rows[bad]
    data = json.loads(lev("ps", "--json").stdout)
    finished = {r["run_id"]: r for r in data["finished"]}
    assert finished[ok]["has_final_output"] is True
    assert finished[bad]["status"] == "error" and data["runs"] == []


def test_ps_with_no_runs_says_so(lev: Lev) -> None:
    out = lev("ps")
    assert out.returncode == 0 and "no runs yet" in out.stdout


@pytest.mark.slow
@pytest.mark.usefixtures("blueprint_permissions")
def test_a_killed_run_leaves_a_meta_json_that_says_where_it_was(tmp_path: Path, agent: Path, env: dict[str, str], lev: Lev) -> None:
    turns = [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]}]
    proc = subprocess.Popen([LEV, "run", str(agent), "--task", "t", "--model", script(tmp_path, turns)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = tmp_path / "home" / "runs"
    deadline = time.monotonic() + 30
    meta_path = None
    while time.monotonic() < deadline:
        metas = list(runs.glob("*/meta.json")) if runs.is_dir() else []
        events = list(runs.glob("*/events.jsonl")) if runs.is_dir() else []
        if metas and events and "tool_started" in events[0].read_text():
            meta_path = metas[0]
            break
        time.sleep(0.05)
    assert meta_path is not None, "the run never reached its tool call"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    meta = json.loads(meta_path.read_text())
    assert meta["status"] == "running"
    assert meta["current_stage"] == "work"
    assert meta["stage_history"] == ["work"]
    out = lev("ps")  # its process is gone: folded into the abandoned line, listed by --all
    assert "1 abandoned run (their process is gone)" in out.stdout and meta["run_id"] not in out.stdout
    out = lev("ps", "--all")
    assert meta["run_id"] in out.stdout and "running (abandoned)" in out.stdout


def test_ps_lists_worker_runs_under_their_parent(tmp_path: Path, lev: Lev) -> None:
    agent = ROOT / "blueprints" / "research-brief"
    parent = lev("run", str(agent), "--task", "q", "--model", "mock", "--quiet").stdout.strip()
    lines = lev("ps").stdout.splitlines()[1:]
    assert lines[0].startswith(parent)
    assert len(lines) == 4 and all(line.startswith("  └ ") for line in lines[1:])
    children = {r["run_id"]: r for r in json.loads(lev("ps", "--json").stdout)["finished"]}
    assert sum(1 for r in children.values() if r["parent_run_id"] == parent) == 3


@pytest.mark.slow
def test_ps_into_a_closed_pipe_exits_quietly(tmp_path: Path, agent: Path, env: dict[str, str], lev: Lev) -> None:
    for _ in range(3):
        lev("run", str(agent), "--task", "t", "--quiet", "--model", script(tmp_path, HAPPY))
    out = subprocess.run(f"'{LEV}' ps | head -1", shell=True, capture_output=True, text=True, env=env)
    assert "Traceback" not in out.stderr and out.stdout.startswith("RUN ID")


def test_an_input_named_like_a_prefix_of_an_option_is_an_input(tmp_path: Path, lev: Lev) -> None:
    folder = tmp_path / "prefix"
    folder.mkdir()
    (folder / "agent.leviath").write_text(AGENT.replace('seed = "input"', 'seed = { caller = "out" }'), encoding="utf-8")
    out = lev("run", str(folder), "--task", "t", "--out", "kept", "--model", script(tmp_path, HAPPY))
    assert out.returncode == 0, out.stderr
    first = json.loads((tmp_path / "home" / "runs" / out.stdout.strip() / "transcript.jsonl").read_text().splitlines()[0])
    assert "kept" in "\n".join(first["system"])


@pytest.mark.slow
@pytest.mark.parametrize("command", [[LEV], [sys.executable, "-m", "lev_nb.cli"]], ids=["console-script", "python-m"])
def test_the_console_script_and_python_m_run_the_cli(env: dict[str, str], command: list[str]) -> None:
    out = subprocess.run([*command, "validate", str(ROOT / "blueprints" / "triage")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "✓ Blueprint 'triage' is valid." in out.stdout
    bad = subprocess.run([*command, "ps", "--bogus"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr
